#pragma once
// PiSSA (LLaMA-Factory's pissa_init / pissa_iter, peft's LoraLayer.pissa_init): a LoRA adapter started
// from the base weight's principal singular triplets, the base keeping the residual. For W [out,in] fp32,
// (U, S, V) its rank-r SVD (niter < 0: torch.linalg.svd; else torch.svd_lowrank(W, r, niter), whose
// random basis is drawn from `gen` as torch draws it from the global generator), S' = S / scaling:
//   A = diag(sqrt(S')) V^T   [r,in]      B = U diag(sqrt(S'))   [out,r]      W <- W - (scaling B) A
// all in fp32, W stored back in its own dtype. Computed on the CPU (what a CPU reference draws).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <tuple>

namespace at {
class Generator;
}

namespace lf::model {

// torch.svd_lowrank(A, q, niter) (torch/_lowrank.py, Halko et al. 2009, algorithm 5.1): (U, S, V).
std::tuple<at::Tensor, at::Tensor, at::Tensor> svd_lowrank(const at::Tensor& a, int64_t q, int64_t niter,
                                                           at::Generator& gen);

// Returns (A, B) and updates `weight` in place to the residual.
std::pair<at::Tensor, at::Tensor> pissa_init(at::Tensor& weight, int64_t rank, double scaling, int64_t niter,
                                             at::Generator& gen);

}  // namespace lf::model
