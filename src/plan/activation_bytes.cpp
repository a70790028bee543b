// The memory model's activation terms (memory_model.h says what each holds and where in the
// code it is allocated). Bytes per rank for one micro-batch of B rows of T tokens.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "memory_inputs.h"

namespace lf::plan {
namespace {

// What one decoder layer saves per token for its backward on the fused path (layers.cpp):
// its input x, the normed input (q/k/v's input), q, k, v (rotated in place), the attention's
// output (o_proj's input), the residual midpoint h and its norm (gate/up's input): 4 [C] + 2 [q]
// + 2 [kv]; the MLP's (memory_inputs.h's mlp_saved: a SwiGLU's 3 [I], or the experts'); the attention's
// fp32 log-sum-exp per head; LoRA's [r] hidden per adapted projection (lora_linear.cpp).
double layer_bytes_per_token(const MemoryInputs& in) {
  const auto& a = in.plan->adapter;
  double b = in.c * (4 * in.h + 2 * in.q + 2 * in.kv) + in.mlp_saved + 4 * in.heads;
  if (a.lora()) {
    b += in.c * static_cast<double>(a.lora_rank) * in.lora_linears;
    // Dropout on the adapters' input: each adapted projection keeps its dropped-out input and mask.
    if (a.lora_dropout > 0)
      for (const auto& l : lora_linears(*in.mc, a)) b += (in.c + 1) * static_cast<double>(l.in);
  }
  // The ATen path (LF_FUSED_KERNELS=0, a build without the kernels): the norms keep fp32
  // intermediates, SwiGLU silu(gate), RoPE its rotated halves. Approximate.
  if (!in.fused) b += 2 * 8 * in.h + in.c * in.i + 2 * in.c * (in.q + in.kv);
  return b;
}

// fp32 weights cast to the compute dtype per use are saved by the projection that uses them
// (master_weight_linear.cpp, or linear's own saved weight): a compute-dtype copy of the layer.
double weight_copies_per_layer(const MemoryInputs& in) {
  return in.fp32_weights && in.c < 4 && !in.zero ? in.c * in.linear_params : 0;
}

}  // namespace

MemoryTerm saved_activations(const MemoryInputs& in) {
  const double layers = static_cast<double>(in.layers_bw);
  if (in.checkpointing) {
    // checkpointing.cpp: the layer's input, and its residual midpoint under lean recompute.
    const double kept = in.lean ? 2 : 1;
    return {"activations", layers * in.tokens * in.c * in.h * kept,
            fmt::format("checkpointed: {} x {} tokens x [C] per layer{}", in.layers_bw,
                        static_cast<int64_t>(in.tokens), in.lean ? " x 2 (input + residual midpoint, lean recompute)" : "")};
  }
  const double per_token = layer_bytes_per_token(in);
  const double copies = weight_copies_per_layer(in);
  return {"activations", layers * (in.tokens * per_token + copies),
          fmt::format("{} layers x {} tokens x {:.0f} B{}", in.layers_bw, static_cast<int64_t>(in.tokens), per_token,
                      copies > 0 ? fmt::format(" + the layers' compute-dtype weight copies ({})", format_bytes(copies))
                                 : std::string())};
}

std::vector<MemoryTerm> layer_backward(const MemoryInputs& in) {
  std::vector<MemoryTerm> out;
  if (in.checkpointing)
    out.push_back({"recompute", in.tokens * layer_bytes_per_token(in) + weight_copies_per_layer(in),
                   "one checkpointed layer's activations, recomputed for its backward"});
  // The MLP's backward: the incoming [C] gradient, then down_proj's [I] input gradient and
  // SwiGLU's two [I] gradients at once.
  out.push_back({"backward", in.tokens * (in.c * in.h + in.mlp_backward),
                 in.mc->moe.num_experts > 0 ? "one layer's gradients ([C] in, the experts' k slots of [C] and [I])"
                                            : "one layer's gradients ([C] in, 3 x [I] in the MLP)"});
  const double layers = static_cast<double>(in.units.size() - 2);
  if (in.stage == 3) {
    const double gathered = std::min(1.0 + static_cast<double>(in.comm.prefetch_units), layers);
    out.push_back({"gathered_units", gathered * in.c * in.largest_layer_unit,
                   fmt::format("ZeRO-3: {} layers gathered ({} prefetched)", gathered, gathered - 1)});
  }
  if (in.reduce_buffers) {
    double largest = 0;
    for (size_t u = 1; u + 1 < in.units.size(); ++u) largest = std::max(largest, static_cast<double>(in.units[u].trainable));
    // The reductions in flight and the unit backward is filling (zero_comm.h).
    const double buffers = std::min(1.0 + static_cast<double>(in.comm.reductions_in_flight), layers);
    out.push_back({"reduce_buffers", buffers * 4 * largest,
                   fmt::format("{} layers' fp32 gradients before their reduce-scatter", buffers)});
  }
  return out;
}

std::vector<MemoryTerm> lm_head_loss(const MemoryInputs& in) {
  const double vh = in.v * in.h;
  // lm_loss.cpp / lm_head_loss.cpp: the final norm's output, the predicting rows' copy, their fp32
  // gradient computed in forward; chunks of ~1 GiB of fp32 logits' rows.
  const double common = in.c * in.tokens * in.h + in.c * in.rows * in.h + 4 * in.rows * in.h;
  const double chunk_rows = std::min(in.rows, std::max(1.0, std::floor(static_cast<double>(1 << 30) / (4 * in.v))));
  const double chunk = in.fused && in.fused_ce ? in.c * chunk_rows * in.v  // the fused CE: one compute-dtype block
                                               : (4 + (in.c < 4 ? in.c : 0)) * chunk_rows * in.v;
  const bool cast_head = in.fp32_weights && in.c < 4 && !in.zero;
  // Forward: the chunk, the weight's fp32 gradient and a chunk's compute-dtype partial of it,
  // the head's compute-dtype copy. Backward: the weight's gradient scaled into a new fp32 tensor
  // beside the saved one (and, reduced by ZeRO, the unit's fp32 buffer it is added into).
  const double fwd = common + chunk + (in.head_trains ? 4 * vh + in.c * vh : 0) + (cast_head ? in.c * vh : 0);
  const double bwd = common + in.c * in.rows * in.h + (in.head_trains ? 8 * vh + (in.reduce_buffers ? 4 * vh : 0) : 0);
  // ZeRO-3 (zero_gather.cpp): the head's forward has the tied embedding gathered with it; its
  // backward gathers the head unit alone (the loss's backward reads no weight) and prefetches the
  // last layers.
  const auto& head = in.units.back();
  const double prefetched =
      std::min(static_cast<double>(in.comm.prefetch_units), static_cast<double>(in.units.size() - 2));
  const double gathered_fwd = in.stage == 3 ? in.c * in.head_unit_params : 0;
  const double gathered_bwd =
      in.stage == 3 ? in.c * (static_cast<double>(head.trainable + head.frozen) + prefetched * in.largest_layer_unit) : 0;
  const bool backward = bwd + gathered_bwd > fwd + gathered_fwd;
  std::vector<MemoryTerm> out{
      {"lm_head_loss", backward ? bwd : fwd,
       fmt::format("chunked loss ({}): {} rows, chunks of {} rows{}", backward ? "its backward" : "its forward",
                   static_cast<int64_t>(in.rows), static_cast<int64_t>(chunk_rows),
                   in.head_trains ? ", lm_head's fp32 gradient" : "")}};
  if (in.stage == 3)
    out.push_back({"gathered_units", backward ? gathered_bwd : gathered_fwd,
                   backward ? fmt::format("ZeRO-3: the head and the last {} layers (prefetched)", prefetched)
                            : std::string("ZeRO-3: the head gathered")});
  return out;
}

}  // namespace lf::plan
