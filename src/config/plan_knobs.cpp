#include "plan_knobs.h"

#include <cstdio>

#include "lf/common/env_knobs.h"
#include "lf/common/error.h"

namespace lf::config {

namespace {

void resolve_kernel_paths(KernelPaths& k) {
  const std::string fused = knob_string("LF_FUSED_KERNELS").value_or("1");
  LF_CHECK(fused == "0" || fused == "1", ConfigError,
           "LF_FUSED_KERNELS={}: expected 1 (fused CUDA kernels where the build has them, the default) or 0 (the "
           "ATen ops, for comparison)",
           fused);
  k.fused_kernels = fused == "1";
  k.lean_recompute = knob_bool("LF_LEAN_RECOMPUTE").value_or(true);
  k.fused_lora = knob_bool("LF_FUSED_LORA").value_or(true);
  k.fp32_weight_grads = knob_bool("LF_FP32_WEIGHT_GRADS").value_or(true);
  k.fused_ce = knob_bool("LF_FUSED_CE").value_or(true);
  k.varlen_attention = knob_bool("LF_VARLEN_ATTENTION").value_or(true);
  k.grouped_mm = knob_bool("LF_GROUPED_MM").value_or(true);
  k.cuda_graphs = knob_bool("LF_CUDA_GRAPHS").value_or(true);
  k.cuda_graph_bucket = knob_int("LF_CUDA_GRAPH_BUCKET").value_or(128);
  k.quant_gemm = knob_string("LF_QUANT_GEMM").value_or("auto");
  k.pad_masked_logits = knob_string("LF_PAD_MASKED_LOGITS").value_or("auto");
  k.pref_padding_free = knob_string("LF_PREF_PADDING_FREE").value_or("auto");
  k.sdpa_backend = knob_string("LF_SDPA_BACKEND").value_or("auto");
  k.fp8_scales_in_gemm = knob_string("LF_FP8_SCALES_IN_GEMM").value_or("auto");  // the table checks auto|0
  LF_CHECK(k.cuda_graph_bucket > 0 && k.cuda_graph_bucket % 8 == 0, ConfigError,
           "LF_CUDA_GRAPH_BUCKET: expected a positive multiple of 8 (tokens a graphed row is padded to), got {}; "
           "unset it for 128",
           k.cuda_graph_bucket);
}

void resolve_parallel_knobs(ParallelSection& p) {
  p.ddp_grad_sink = knob_bool("LF_DDP_GRAD_SINK").value_or(true);
  p.ddp_sparse_embedding = knob_string("LF_DDP_SPARSE_EMBEDDING").value_or("auto");
  p.offload_copy_streams = knob_bool("LF_OFFLOAD_COPY_STREAMS").value_or(true);
  p.offload_device_norm = knob_bool("LF_OFFLOAD_DEVICE_NORM").value_or(true);
}

void resolve_logging_knobs(LoggingSection& l) {
  l.late_readback = knob_bool("LF_LATE_READBACK").value_or(true);
  l.profile_phases = knob_bool("LF_PROFILE_PHASES").value_or(false);
  l.profile_trace = knob_string("LF_PROFILE_TRACE").value_or("");
  if (const auto steps = knob_string("LF_PROFILE_TRACE_STEPS"); steps && !steps->empty()) {
    long long a = 0, b = 0;
    LF_CHECK(std::sscanf(steps->c_str(), "%lld:%lld", &a, &b) == 2 && a >= 0 && b >= a, ConfigError,
             "LF_PROFILE_TRACE_STEPS={}: expected FIRST:LAST optimizer steps, 0 <= FIRST <= LAST (0: the pass "
             "before step 1, the preference stages' reference)", *steps);
    l.profile_trace_first = a;
    l.profile_trace_last = b;
  }
  if (auto t = knob_number("LF_PEAK_TFLOPS"); t && *t > 0) l.peak_tflops = *t;
}

}  // namespace

void resolve_plan_knobs(JobPlan& plan) {
  resolve_kernel_paths(plan.model.kernels);
  const auto& k = plan.model.kernels;  // sft's pure_bf16 reads LF_PAD_MASKED_LOGITS too: only these stages conflict
  LF_CHECK(!(plan.objective.preference() && k.pref_padding_free == "1" && k.pad_masked_logits == "1"), ConfigError,
           "stage {}: LF_PREF_PADDING_FREE=1 with LF_PAD_MASKED_LOGITS=1: expected one of them (padding-free rows have "
           "no pad positions to mask); unset one",
           plan.objective.stage);
  resolve_parallel_knobs(plan.parallel);
  plan.optim.fused_clip = knob_bool("LF_FUSED_CLIP").value_or(true);
  resolve_logging_knobs(plan.logging);
}

}  // namespace lf::config
