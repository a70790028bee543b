// The AVX2+FMA AdamW loop: 8 elements a step; the tail is copied into a
// zero-padded 8-lane block and run through the same code (so a tail element
// gets the bits a full vector would). Compiled with -mavx2 -mfma
// -ffp-contract=off and only <immintrin.h> included (see host_adamw_kernel.h);
// called only where the CPU has AVX2 and FMA.
#include <immintrin.h>

#include "host_adamw_kernel.h"

namespace lf::offload::detail {

namespace {

struct Vec {
  __m256 grad_scale, decay, lerp_coeff, beta2, one_minus_beta2, bc2_sqrt, eps, neg_step_size;
};

// Round to nearest even on the bits; NaN -> 0xFFFF (torch). [8 x fp32] -> [8 x u16]
inline __attribute__((always_inline)) __m128i bf16_bits(__m256 p) {
  const __m256i u = _mm256_castps_si256(p);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb), 16);
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(p, p, _CMP_UNORD_Q));
  r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0xFFFF), nan);
  // packus works per 128-bit lane: [r0..r3 r0..r3 | r4..r7 r4..r7]; keep qwords 0 and 2.
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
  return _mm256_castsi256_si128(packed);
}

template <bool kLerpSmall, bool kBf16>
inline __attribute__((always_inline)) void step8(float* pp, float* mp, float* vp, const float* gp, uint16_t* out,
                                                 const Vec& c) {
  const __m256 g = _mm256_mul_ps(_mm256_loadu_ps(gp), c.grad_scale);
  __m256 p = _mm256_mul_ps(_mm256_loadu_ps(pp), c.decay);
  __m256 m = _mm256_loadu_ps(mp);
  m = _mm256_fmadd_ps(c.lerp_coeff, _mm256_sub_ps(g, m), kLerpSmall ? m : g);
  __m256 v = _mm256_mul_ps(_mm256_loadu_ps(vp), c.beta2);
  v = _mm256_fmadd_ps(_mm256_mul_ps(c.one_minus_beta2, g), g, v);
  const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(v), c.bc2_sqrt), c.eps);
  p = _mm256_add_ps(p, _mm256_div_ps(_mm256_mul_ps(c.neg_step_size, m), denom));
  _mm256_storeu_ps(pp, p);
  _mm256_storeu_ps(mp, m);
  _mm256_storeu_ps(vp, v);
  if constexpr (kBf16) _mm_storeu_si128(reinterpret_cast<__m128i*>(out), bf16_bits(p));
}

template <bool kLerpSmall, bool kBf16>
void loop(const AdamWSpan& x, const Vec& c) {
  int64_t i = 0;
  for (; i + 8 <= x.n; i += 8)
    step8<kLerpSmall, kBf16>(x.param + i, x.exp_avg + i, x.exp_avg_sq + i, x.grad + i, kBf16 ? x.out_bf16 + i : nullptr,
                             c);
  const int64_t rest = x.n - i;
  if (rest == 0) return;
  alignas(32) float p[8] = {}, m[8] = {}, v[8] = {}, g[8] = {};
  alignas(16) uint16_t out[8] = {};
  for (int64_t j = 0; j < rest; ++j) {
    p[j] = x.param[i + j];
    m[j] = x.exp_avg[i + j];
    v[j] = x.exp_avg_sq[i + j];
    g[j] = x.grad[i + j];
  }
  step8<kLerpSmall, kBf16>(p, m, v, g, out, c);
  for (int64_t j = 0; j < rest; ++j) {
    x.param[i + j] = p[j];
    x.exp_avg[i + j] = m[j];
    x.exp_avg_sq[i + j] = v[j];
    if (kBf16) x.out_bf16[i + j] = out[j];
  }
}

}  // namespace

void adamw_avx2(const AdamWSpan& x, const AdamWConstants& k) {
  const Vec c{_mm256_set1_ps(k.grad_scale), _mm256_set1_ps(k.decay),           _mm256_set1_ps(k.lerp_coeff),
              _mm256_set1_ps(k.beta2),      _mm256_set1_ps(k.one_minus_beta2), _mm256_set1_ps(k.bc2_sqrt),
              _mm256_set1_ps(k.eps),        _mm256_set1_ps(k.neg_step_size)};
  const bool bf16 = x.out_bf16 != nullptr;
  if (k.lerp_small) bf16 ? loop<true, true>(x, c) : loop<true, false>(x, c);
  else bf16 ? loop<false, true>(x, c) : loop<false, false>(x, c);
}

}  // namespace lf::offload::detail
