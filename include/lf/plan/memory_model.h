#pragma once
// lf-train's one memory model: the bytes a rank will hold, predicted from the job plan, the
// model's config.json and the world layout before anything loads (torch-free). `lf-train plan`
// prints it, doctor compares it with the GPUs' free memory, the worker checks its host bytes
// against the node before offload pins them; ZeRO's state is zero_bytes.h's formula, which
// ZeroStrategy::predicted_bytes() can call with the units it built.
//
// What it models is lf-train's allocation pattern on the GPU path (fused kernels, the chunked
// LM-head loss), read from the code that allocates:
//   state        weights in the compute dtype (a LoRA base; ZeRO's copies), fp32 master weights,
//                fp32 gradients, AdamW's two fp32 moments, by strategy (single, DDP's buckets,
//                ZeRO's shards: zero_bytes.h); under expert parallelism of a rank's own parameters,
//                E / ep of each sparse layer's experts (model_units.h's rank_numel);
//   activations  what each decoder layer saves for backward (model/layers.cpp): per token the
//                layer's input, the normed input, q, k, v, the attention output, the residual
//                midpoint and its norm ([C] or [q]/[kv] each), SwiGLU's gate, up and product
//                ([I] each), LoRA's [r] per adapted projection; over fp32 weights, each
//                projection's compute-dtype weight copy (master_weight_linear.cpp saves it).
//                Checkpointed (checkpointing.cpp) a layer saves only its input, and its residual
//                midpoint too under lean recompute;
//   backward     one layer's working set: recomputed activations (checkpointed) and the MLP
//                backward's gradients ([C] in, three [I] temporaries);
//   LM head      the chunked loss (lm_head_loss.cpp): the rows' fp32 gradient, one chunk of
//                logits (~1 GiB of fp32 rows: in the compute dtype under the fused CE), and when
//                lm_head trains its fp32 weight gradient and a compute-dtype partial;
//   ZeRO         stage 3: two gathered units (the one computing, the one prefetched); stages 2,
//                3 over several ranks or offloaded: the fp32 gradients of the units waiting for
//                their reduce-scatter (up to three in flight).
// The peak is the larger of the end of forward (state + saved activations + the larger of the
// loss and a layer's backward) and the end of backward (state + every gradient, a tied
// embedding's dense lookup gradient), which the optimizer step does not exceed. The allocator's
// reserve beyond its allocated peak (fragmentation) is a separate kind, not in the peak.
// Checked against the peaks measured on one H200 (docs/BENCHMARKS.md, docs/device-runs/): within
// 10% (issue 28's bar; 5% today) of each row of tests/fixtures/plan/measured_peaks.json
// (memory_model_test.cpp). Not measured yet, so modelled from the code alone: DDP's buckets and
// ZeRO over several GPUs (the shards divide as DeepSpeed's formula says), the ATen path
// (LF_FUSED_KERNELS=0: its extra fp32 intermediates are approximate), LoRA dropout (its dropped
// inputs counted), DoRA (its per-use weight norms not counted), freeze tuning, fp16.
#include <cstdint>
#include <string>
#include <vector>

#include "lf/config/job_plan.h"
#include "lf/model/config.h"
#include "lf/plan/zero_comm.h"

namespace lf::plan {

struct WorldLayout {
  int64_t nnodes = 1;
  int64_t nproc_per_node = 1;
  int64_t world() const { return nnodes * nproc_per_node; }
};

// One kind of bytes: "weights", "master", "gradients", "moments", "activations", "recompute",
// "backward", "lm_head_loss", "gathered_units", "reduce_buffers", "embedding_grad", "runtime";
// host: "offload".
struct MemoryTerm {
  std::string kind;
  double bytes = 0;
  std::string what;  // one line: the formula's reading for this plan
};

struct MemoryPrediction {
  std::vector<MemoryTerm> gpu;   // per rank: the terms of the peak (each counted once)
  std::vector<MemoryTerm> host;  // per rank: host memory offload pins
  std::string peak_phase;        // "forward end" | "backward end" (every gradient there, the step next)
  double allocator_slack = 0;    // the caching allocator's reserve beyond the allocated peak (estimate)
  // Row length and micro-batch the activations were counted for.
  int64_t row_tokens = 0, micro_batch = 0;
  int64_t offloaded_units = 0;   // ZeRO-Offload: the units whose state is on the host (offload_ratio)
  ZeroCommDepths zero_comm;      // ZeRO: the buckets as counts of units (zero_comm.h)

  double gpu_peak() const;   // the predicted peak allocated bytes (sum of gpu)
  double host_total() const;
  double gpu_bytes(const std::string& kind) const;  // 0 when absent
  const MemoryTerm& dominant() const;         // the largest GPU term
};

// Throws ConfigError when the plan asks for what the model cannot say (none so far).
MemoryPrediction predict_memory(const config::JobPlan& plan, const model::ModelConfig& mc, const WorldLayout& world);

// "12.3 GiB" (binary units, as torch's memory figures and docs/BENCHMARKS.md).
std::string format_bytes(double bytes);

}  // namespace lf::plan
