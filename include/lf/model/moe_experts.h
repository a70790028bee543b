#pragma once
// The routed experts of a mixture-of-experts layer: every token through its k chosen experts
// (each a SwiGLU), weighted by its routing weights and summed. No token is dropped (transformers).
//
//   slots: the N·k (token, choice) pairs sorted by expert (stable: within an expert by token)
//   xs = x[token of slot]                  [S, C]   S = N·k
//   h  = xs · gate_up[e]^T per expert      [S, 2I]  (each expert's gate rows, then its up rows)
//   a  = silu(h[:, :I]) · h[:, I:]          [S, I]
//   y  = a · down[e]^T per expert          [S, C]
//   out[n] = Σ_j w[n, j] · y[slot of (n, j)]  [N, C]
//
// The per-expert products are grouped GEMMs: on a GPU in bf16 ATen's torch._grouped_mm (one
// launch for every expert, group boundaries read on the device: no host sync), elsewhere one
// GEMM per expert over its rows (the CPU reference, exact). One autograd node for the whole block:
// it keeps x, h and y (not the permuted xs nor a, recomputed when a weight gradient needs them),
// and asks for no weight gradient GEMM of frozen experts (LoRA).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace lf::model {

// The permutation of one forward, from the chosen experts.
struct ExpertRouting {
  at::Tensor order;    // [S] int64: the flat choice (n·k + j) in each sorted slot
  at::Tensor token;    // [S] int64: order / k, the token each slot takes
  at::Tensor slot_of;  // [N·k] int64: the slot of flat choice n·k + j (order's inverse)
  at::Tensor ends;     // [E] int32: cumulative slot counts; expert e's slots are [ends[e-1], ends[e])
  std::vector<int64_t> host_ends;  // ends on the host: the per-expert path only (empty on the grouped one)
  int64_t top_k = 0;
};

// chosen [N, k] int64 expert indices. `grouped`: the GEMMs will run grouped (no host copy of ends).
ExpertRouting route_tokens(const at::Tensor& chosen, int64_t experts, bool grouped);

// Whether routed_experts takes the grouped GEMMs for activations like x (CUDA, bf16, the plan's
// kernel paths' grouped_mm on).
bool grouped_experts_for(const at::Tensor& x);

// x [N, C] and the experts' weights in the compute dtype (gate_up [E, 2I, C], down [E, C, I]),
// weights [N, k] the routing weights; returns [N, C] in x's dtype.
at::Tensor routed_experts(const at::Tensor& x, const at::Tensor& gate_up, const at::Tensor& down,
                          const at::Tensor& weights, const ExpertRouting& routing);

}  // namespace lf::model
