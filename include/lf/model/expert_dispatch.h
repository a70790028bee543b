#pragma once
// The seam expert parallelism attaches to (src/parallel/expert_parallel.cpp). A MoeBlock
// (moe_block.h) stays single-device: it routes its tokens, then hands them and its own experts'
// weights to the dispatch installed on it, if any, instead of running routed_experts itself.
// The dispatch sends each (token, choice) to the rank that holds the chosen expert, runs that
// rank's experts there and combines the outputs back, weighted, as routed_experts would.
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace lf::model {

class ExpertDispatch {
 public:
  virtual ~ExpertDispatch() = default;
  // x [N, C] and weights [N, k] in the compute dtype, chosen [N, k] int64 expert indices in
  // [0, experts); gate_up [E_local, 2I, C], down [E_local, C, I]: the experts this block holds
  // (compute dtype). Returns Σ_j weights[n, j] · expert_{chosen[n, j]}(x[n]) as [N, C].
  virtual at::Tensor routed(const at::Tensor& x, const at::Tensor& chosen, const at::Tensor& weights,
                            const at::Tensor& gate_up, const at::Tensor& down, int64_t experts) = 0;
};

}  // namespace lf::model
