// The memory model (memory_model.h): the plan resolved into its inputs once, the training
// state by strategy, and the peak assembled from the terms (activation_bytes.cpp).
#include "lf/plan/memory_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "lf/common/error.h"
#include "lf/model/model_layout.h"
#include "lf/plan/zero_bytes.h"
#include "memory_inputs.h"

namespace lf::plan {
namespace {

// The rows' length the trainer pads to (train/batch.h: a multiple of 8; unpacked rows under CUDA
// graphs: of the graph bucket, train_step.cpp). Unpacked data: the longest row, cutoff_len at most.
int64_t row_length(const config::JobPlan& p, const WorldLayout& w) {
  const auto& k = p.model.kernels;
  const bool graphs = k.cuda_graphs && w.world() == 1 && !p.parallel.sharded() && !p.data.neat_packing &&
                      !(p.adapter.lora() && p.adapter.lora_dropout > 0);
  const int64_t multiple = graphs && !p.data.packing ? k.cuda_graph_bucket : 8;
  return (p.data.cutoff_len + multiple - 1) / multiple * multiple;
}

std::vector<ZeroUnitCount> zero_units(const MemoryInputs& in) {
  std::vector<ZeroUnitCount> out;
  for (size_t u = 0; u < in.units.size(); ++u) out.push_back({in.units[u].trainable, in.units[u].frozen, in.host_units[u]});
  return out;
}

// The training state by kind; `all_grads`: every gradient (the optimizer step), else those
// resident at the end of forward (buckets, shards, an accumulating step's sums).
std::vector<MemoryTerm> state_terms(const MemoryInputs& in, bool all_grads, double* host_bytes) {
  const auto& p = *in.plan;
  const double t = static_cast<double>(in.counts.trainable), total = static_cast<double>(in.counts.total);
  if (in.zero) {
    const auto units = zero_units(in);
    ZeroLayout z{static_cast<int>(in.stage), in.world, static_cast<int64_t>(in.c), in.fp32_weights ? 4 : static_cast<int64_t>(in.c),
                 p.parallel.offload};
    const auto s = zero_state_bytes(units, z);
    double th = 0;
    for (const auto& u : units) th += u.host ? static_cast<double>(u.trainable) : 0;
    const double n = static_cast<double>(in.world);
    *host_bytes = s.host;
    return {{"weights", s.params, in.stage < 3 ? "compute-dtype parameters (replicated)" : "frozen shards"},
            {"master", s.master - 4 * th / n, "fp32 master shards"},
            {"gradients", s.grads - 4 * th / n, in.stage == 1 ? "fp32 gradients (full sums + shards)" : "fp32 gradient shards"},
            {"moments", s.moments - 8 * th / n, "AdamW moments (fp32 shards)"}};
  }
  *host_bytes = 0;
  std::vector<MemoryTerm> out;
  if (p.adapter.peft() && in.quant.weights_per_layer > 0) {
    const double saved = in.quant.saved_per_layer * static_cast<double>(in.mc->num_layers);
    out.push_back({"weights", in.c * total - saved,
                   fmt::format("the frozen base: decoder linears in {} ({:.4g} bytes a weight), the rest in the "
                               "compute dtype", in.quant.what, in.quant.bytes_per_weight)});
    out.push_back({"master", 4 * t, "fp32 adapters"});
  } else if (p.adapter.peft()) {
    out.push_back({"weights", in.c * total, "the frozen base in the compute dtype"});
    out.push_back({"master", 4 * t, "fp32 adapters"});
  } else {
    out.push_back({"master", 4 * total, "fp32 weights (the master copy)"});
  }
  out.push_back({"moments", 8 * t, "AdamW moments (fp32)"});
  const bool resident = in.ddp || p.schedule.gradient_accumulation_steps > 1;
  if (all_grads || resident)
    out.push_back({"gradients", 4 * t, in.expert_parallel > 1 ? "fp32 gradients (DDP's buckets; the experts' local)"
                                       : in.ddp                 ? "fp32 gradient buckets (DDP)"
                                                                : "fp32 gradients"});
  if (in.expert_parallel > 1)  // units and counts are already this rank's (memory_inputs)
    for (auto& term : out) term.what += fmt::format(", experts: this rank's {} of {} a layer",
                                                    in.mc->moe.num_experts / in.expert_parallel, in.mc->moe.num_experts);
  return out;
}

double sum(const std::vector<MemoryTerm>& terms) {
  return std::accumulate(terms.begin(), terms.end(), 0.0, [](double a, const MemoryTerm& t) { return a + t.bytes; });
}

// cuBLAS keeps a 32 MiB workspace per stream on Hopper (two streams: compute and the side
// stream of graphs or copies); the RoPE tables.
MemoryTerm runtime_term(const MemoryInputs& in) {
  const double dequant = in.c * in.quant.largest_linear;  // QLoRA: one buffer the GEMMs dequantize into
  return {"runtime",
          64.0 * (1 << 20) + 2 * in.c * static_cast<double>(in.row_len) * static_cast<double>(in.mc->head_dim) + dequant,
          dequant > 0 ? "cuBLAS workspaces, RoPE tables, the quantized weights' GEMM buffer"
                      : "cuBLAS workspaces, RoPE tables"};
}

// The caching allocator's reserve beyond the allocated peak, from the reserved / allocated ratios
// measured on one H200 (docs/device-runs/2026-12-02): 1.05-1.08 without checkpointing, 1.12-1.18
// with it (the recompute frees and re-allocates blocks of other sizes); offloaded, the copy
// streams' blocks are cached per stream: about the offloaded units' fp32 gradients more (1.5B
// stage 3: +6.7 GiB over 7.0; 7B: +36.5 over 25.1). An estimate for doctor's free-memory check.
double allocator_slack(const MemoryInputs& in, double peak) {
  double slack = (in.checkpointing ? 0.18 : 0.08) * peak;
  for (size_t u = 0; u < in.units.size(); ++u)
    if (in.host_units[u]) slack += 4 * static_cast<double>(in.units[u].trainable) / static_cast<double>(in.world);
  return slack;
}

}  // namespace

// ZeRO's units as the strategy builds them (zero_strategy.cpp): each padded to a multiple of the
// world, the frozen parameters gathered with their unit under stage 3.
ZeroCommInputs zero_comm_inputs(const config::ParallelSection& p, const MemoryInputs& in) {
  const auto padded = [&](int64_t n) { return (n + in.world - 1) / in.world * in.world; };
  const auto c = static_cast<int64_t>(in.c);
  ZeroCommInputs z;
  z.stage = in.stage;
  z.prefetch_bucket_mb = p.prefetch_bucket_mb;
  z.reduce_bucket_mb = p.reduce_bucket_mb;
  z.allgather_bucket_mb = p.allgather_bucket_mb;
  z.overlap_comm = p.overlap_comm;
  z.compute_bytes = c;
  z.units = static_cast<int64_t>(in.units.size());
  for (const auto& u : in.units) {
    z.largest_trainable = std::max(z.largest_trainable, padded(u.trainable));
    z.largest_gathered_bytes =
        std::max(z.largest_gathered_bytes, c * (padded(u.trainable) + (in.stage == 3 ? padded(u.frozen) : 0)));
  }
  return z;
}

// The decoder layers' weights and what their MLPs keep per token, averaged over the layers (a
// mixture of experts' layers differ from its dense ones). SwiGLU (layers.cpp): gate, up and their
// product, 3 [I]; backward 3 [I]. Router over experts (moe_block.cpp, moe_experts.cpp): the logits
// [E] and the fp32 softmax, the top-k, three int64 [k] routing indices, then per chosen slot h [2I]
// and y [C]; backward per slot dy [C], da [I], dh [2I], the recomputed swiglu [I] and dx [C]; a
// shared expert as a SwiGLU.
static void layer_mlp_bytes(const model::ModelConfig& mc, MemoryInputs& in) {
  const auto layout = model::model_layout(mc);
  const double layers = static_cast<double>(std::max<int64_t>(1, mc.num_layers)), c = in.c;
  for (const auto& p : layout.params)  // this rank's experts under expert parallelism
    if (p.unit >= 1 && p.unit <= mc.num_layers && p.shape.size() >= 2)
      in.linear_params += static_cast<double>(rank_numel(p, in.expert_parallel)) / layers;
  for (const auto& l : layout.layers) {
    const auto& m = l.mlp;
    if (m.kind == model::MlpKind::kSwiGlu) {
      in.mlp_saved += c * 3 * static_cast<double>(m.intermediate) / layers;
      in.mlp_backward = std::max(in.mlp_backward, c * 3 * static_cast<double>(m.intermediate));
      continue;
    }
    const auto& e = m.moe;
    const double k = static_cast<double>(e.top_k), ie = static_cast<double>(e.expert_intermediate),
                 is = static_cast<double>(e.shared_intermediate), experts = static_cast<double>(e.experts);
    in.mlp_saved += (experts * (c + 8) + k * (24 + 8 + c * (2 * ie + in.h)) + c * 3 * is) / layers;
    // Expert parallelism (parallel/expert_dispatch.cpp): the owner's experts keep the rows they
    // received, xr [R, C], and their unit weights [R, 1]; the un-permute keeps the returned rows
    // gathered, [N, k, C]; the two index_selects their int64 indices [N·k]. R = N·k on average
    // (balanced routing): per token 2k [C], k weights and 2k indices more.
    if (in.expert_parallel > 1) in.mlp_saved += k * (c * (2 * in.h + 1) + 16) / layers;
    in.mlp_backward = std::max(in.mlp_backward, k * c * (2 * in.h + 4 * ie) + c * 3 * is);
  }
}

MemoryInputs memory_inputs(const config::JobPlan& p, const model::ModelConfig& mc, const WorldLayout& w) {
  LF_CHECK(mc.hidden_size > 0 && mc.num_layers > 0 && mc.vocab_size > 0 && mc.num_heads > 0, ConfigError,
           "the memory model needs the model's sizes (hidden_size, num_hidden_layers, vocab_size, "
           "num_attention_heads); config.json gave {}, {}, {}, {}",
           mc.hidden_size, mc.num_layers, mc.vocab_size, mc.num_heads);
  MemoryInputs in;
  in.plan = &p;
  in.mc = &mc;
  in.c = p.precision.bf16 || p.precision.fp16 ? 2 : 4;
  in.row_len = row_length(p, w);
  // dpo and rm run a pair's two rows in one forward (kto: the target rows with gradients, the KL rows apart).
  const bool pairs = p.objective.stage == "dpo" || p.objective.stage == "rm";
  in.micro_batch = p.schedule.per_device_train_batch_size * (pairs ? 2 : 1);
  in.tokens = static_cast<double>(in.micro_batch * in.row_len);
  in.rows = static_cast<double>(in.micro_batch * (in.row_len - 1));
  in.h = static_cast<double>(mc.hidden_size);
  in.q = static_cast<double>(mc.num_heads * mc.head_dim);
  in.kv = static_cast<double>(mc.num_kv_heads * mc.head_dim);
  in.i = static_cast<double>(mc.intermediate_size);
  in.v = static_cast<double>(mc.vocab_size);
  in.heads = static_cast<double>(mc.num_heads);
  in.layers_bw = layers_in_backward(mc, p.adapter);
  in.expert_parallel = mc.moe.num_experts > 0 ? std::max<int64_t>(1, p.parallel.expert_parallel_size) : 1;
  layer_mlp_bytes(mc, in);
  in.lora_linears = static_cast<double>(lora_linears(mc, p.adapter).size());
  in.world = std::max<int64_t>(1, w.world());
  in.stage = p.parallel.zero_stage;
  in.zero = p.parallel.sharded();
  in.ddp = !in.zero && in.world > 1;
  in.offload = in.zero && p.parallel.offloaded();
  in.checkpointing = p.model.gradient_checkpointing;
  in.lean = p.model.kernels.lean_recompute;
  in.fused = p.model.kernels.fused_kernels;
  in.fused_ce = p.model.kernels.fused_ce;
  in.head_trains = head_trainable(mc, p.adapter);
  in.fp32_weights = !p.adapter.peft();
  in.reduce_buffers = in.zero && in.stage >= 2 && (in.world > 1 || in.offload);
  in.units = unit_parameters(mc, p.adapter, in.expert_parallel);
  in.counts = parameter_counts(mc, p.adapter, in.expert_parallel);
  in.quant = quantized_base(p.precision, mc, in.c, p.adapter.lora());
  apply_to_units(in.quant, in.c, in.units);
  std::vector<int64_t> trainable;
  for (const auto& u : in.units) trainable.push_back(u.trainable);
  in.host_units = in.offload ? offload_host_units(trainable, p.parallel.offload_ratio) : std::vector<bool>(in.units.size(), false);
  // A unit's flat buffer holds its trainable and its frozen parameters (zero_units.h).
  const auto elements = [](const UnitParams& u) { return static_cast<double>(u.trainable + u.frozen); };
  for (size_t u = 1; u + 1 < in.units.size(); ++u) in.largest_layer_unit = std::max(in.largest_layer_unit, elements(in.units[u]));
  in.head_unit_params = elements(in.units.back()) + (mc.tie_word_embeddings ? elements(in.units.front()) : 0);
  if (in.zero) in.comm = zero_comm_depths(zero_comm_inputs(p.parallel, in));
  return in;
}

MemoryPrediction predict_memory(const config::JobPlan& p, const model::ModelConfig& mc, const WorldLayout& w) {
  const auto in = memory_inputs(p, mc, w);
  MemoryPrediction m;
  m.row_tokens = in.row_len;
  m.offloaded_units = std::count(in.host_units.begin(), in.host_units.end(), true);
  m.zero_comm = in.comm;
  m.micro_batch = in.micro_batch;
  double host = 0;
  // End of forward: the state, the saved activations, and the larger of the loss and a layer's backward.
  auto fwd = state_terms(in, /*all_grads=*/false, &host);
  fwd.push_back(saved_activations(in));
  const auto loss = lm_head_loss(in), layer = layer_backward(in);
  for (const auto& t : sum(loss) >= sum(layer) ? loss : layer) fwd.push_back(t);
  fwd.push_back(runtime_term(in));
  // The end of backward and the optimizer step: the state with every gradient. One process: a
  // tied, trained embedding's lookup gradient arrives dense ([V,C] fp32) and is added into the
  // gradient lm_head's loss left there.
  auto step = state_terms(in, /*all_grads=*/true, &host);
  if (!in.zero && !in.ddp && in.mc->tie_word_embeddings && in.units.front().trainable > 0)
    step.push_back({"embedding_grad", 4 * in.v * in.h, "the tied embedding's dense gradient before it is added"});
  step.push_back(runtime_term(in));
  const bool at_step = sum(step) > sum(fwd);
  m.gpu = at_step ? step : fwd;
  m.peak_phase = at_step ? "backward end" : "forward end";
  std::erase_if(m.gpu, [](const MemoryTerm& t) { return t.bytes <= 0; });
  if (host > 0)
    m.host.push_back({"offload", host,
                      fmt::format("fp32 master, moments and gradients of the offloaded units over {} rank(s){}", in.world,
                                  p.parallel.offload_ratio < 1 ? fmt::format(" (offload_ratio {})", p.parallel.offload_ratio)
                                                               : std::string())});
  m.allocator_slack = allocator_slack(in, m.gpu_peak());
  return m;
}

double MemoryPrediction::gpu_peak() const { return sum(gpu); }
double MemoryPrediction::host_total() const { return sum(host); }

double MemoryPrediction::gpu_bytes(const std::string& kind) const {
  double b = 0;
  for (const auto& t : gpu)
    if (t.kind == kind) b += t.bytes;
  return b;
}

const MemoryTerm& MemoryPrediction::dominant() const {
  static const MemoryTerm none{"none", 0, ""};
  if (gpu.empty()) return none;
  return *std::max_element(gpu.begin(), gpu.end(), [](const MemoryTerm& a, const MemoryTerm& b) { return a.bytes < b.bytes; });
}

std::string format_bytes(double bytes) {
  const double gib = static_cast<double>(int64_t{1} << 30), mib = static_cast<double>(1 << 20);
  if (bytes >= gib) return fmt::format("{:.2f} GiB", bytes / gib);
  if (bytes >= mib) return fmt::format("{:.1f} MiB", bytes / mib);
  return fmt::format("{:.0f} KiB", bytes / 1024);
}

}  // namespace lf::plan
