// The portable AdamW loop (any CPU). Compiled with -ffp-contract=off: the fused
// multiply-adds are exactly torch's (lerp, addcmul), written out, and no other
// product may be fused, so this path gives the vector paths' bits.
#include "host_adamw_kernel.h"

#include <cmath>
#include <cstring>

namespace lf::offload::detail {

namespace {

uint16_t bf16_round(float f) {
  if (std::isnan(f)) return 0xFFFF;  // what torch 2.13's CPU .to(bfloat16) gives
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace

void adamw_scalar(const AdamWSpan& x, const AdamWConstants& c) {
  for (int64_t i = 0; i < x.n; ++i) {
    const float g = x.grad[i] * c.grad_scale;
    float p = x.param[i] * c.decay;
    float m = x.exp_avg[i];
    m = std::fma(c.lerp_coeff, g - m, c.lerp_small ? m : g);
    float v = x.exp_avg_sq[i] * c.beta2;
    v = std::fma(c.one_minus_beta2 * g, g, v);
    const float denom = std::sqrt(v) / c.bc2_sqrt + c.eps;
    p = p + (c.neg_step_size * m) / denom;
    x.param[i] = p;
    x.exp_avg[i] = m;
    x.exp_avg_sq[i] = v;
    if (x.out_bf16) x.out_bf16[i] = bf16_round(p);
  }
}

}  // namespace lf::offload::detail
