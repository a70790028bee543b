#pragma once
// Internal to src/offload: the per-ISA AdamW loops and what they share. Each
// loop lives in its own file compiled for its ISA (-mavx512f / -mavx2 -mfma),
// so this header holds only plain data and declarations: an inline function
// defined here would be compiled once per ISA and the linker could keep the
// AVX-512 copy for every caller.
#include <cstdint>

namespace lf::offload::detail {

// HostAdamWStep's scalars rounded to float where torch rounds them (see
// make_adamw_constants in host_adamw.cpp).
struct AdamWConstants {
  float grad_scale;
  float decay;            // 1 - lr wd
  float lerp_coeff;       // 1 - b1 when lerp_small, else (1 - b1) - 1
  float beta2;
  float one_minus_beta2;  // 1 - b2
  float bc2_sqrt;         // sqrt(1 - b2^t)
  float eps;
  float neg_step_size;    // -lr / (1 - b1^t)
  bool lerp_small;        // |1 - b1| < 0.5: torch's lerp m + w (g - m), else g + (w - 1) (g - m)
};

struct AdamWSpan {
  float* param;
  float* exp_avg;
  float* exp_avg_sq;
  const float* grad;
  uint16_t* out_bf16;  // may be null
  int64_t n;
};

void adamw_scalar(const AdamWSpan& x, const AdamWConstants& c);
#if defined(LF_HOST_ADAMW_X86)
void adamw_avx2(const AdamWSpan& x, const AdamWConstants& c);
void adamw_avx512(const AdamWSpan& x, const AdamWConstants& c);
#endif

}  // namespace lf::offload::detail
