#pragma once
// The host AdamW step of CPU offload (issue 14): fp32 master weights and both
// moments live in host memory; this updates n of them in one pass over memory
// (16 bytes read + 12 written per element, + 2 with the bf16 copy) instead of
// torch's eight passes.
//
// Math: torch.optim.AdamW (adam.py _single_tensor_adam / _multi_tensor_adam,
// decoupled weight decay), operation for operation, with the scalars computed
// in double and rounded to float where torch rounds them:
//   g  = grad * grad_scale
//   p  = p * (1 - lr wd)
//   m  = lerp(m, g, 1 - b1)                  (torch's fma form)
//   v  = fma((1 - b2) g, g, v * b2)          (torch's addcmul)
//   p  = p + (-lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// m and v equal torch's bit for bit; p within an ulp per step (torch's CPU
// sqrt goes through MKL, which is not always correctly rounded). Every ISA
// path (AVX-512, AVX2+FMA, portable) gives the same bits as the others.
//
// Threading: the plain overload is thread-safe for disjoint ranges; the pool
// overload splits one range over a HostThreadPool.
#include <cstdint>

#include "lf/offload/host_thread_pool.h"

namespace lf::offload {

struct HostAdamWStep {
  // double like torch's Python floats and lf::optim::AdamWOptions; rounded to
  // float where torch rounds them.
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  int64_t step = 1;         // 1-based: the step being taken, for bias correction
  float grad_scale = 1.0f;  // multiplies grad first (clip coefficient, loss-scale unscale)
};

// n elements in place: param (fp32 master), exp_avg, exp_avg_sq, from grad (fp32, not
// written). When out_bf16 != nullptr also writes bf16(param after update), rounded to
// nearest even as torch's .to(torch.bfloat16) (NaN -> 0xFFFF, as torch 2.13 on CPU).
// Throws ConfigError on a bad hyperparameter (lr < 0, beta outside [0, 1), eps <= 0,
// step < 1) or n < 0.
void host_adamw_update(float* param, float* exp_avg, float* exp_avg_sq, const float* grad, uint16_t* out_bf16,
                       int64_t n, const HostAdamWStep& s);

// The same, split over the pool in contiguous pieces of at least kHostAdamWGrain elements.
void host_adamw_update(HostThreadPool& pool, float* param, float* exp_avg, float* exp_avg_sq, const float* grad,
                       uint16_t* out_bf16, int64_t n, const HostAdamWStep& s);

// Below this many elements a range is not worth another thread (~1 MiB of state).
constexpr int64_t kHostAdamWGrain = 1 << 16;

}  // namespace lf::offload
