// The AVX-512F AdamW loop: 16 elements a step, the tail through the same code
// under a lane mask (so a tail element gets the bits a full vector would).
// Compiled with -mavx512f -ffp-contract=off and only <immintrin.h> included
// (see host_adamw_kernel.h for why); called only where the CPU has AVX-512F.
#include <immintrin.h>

#include "host_adamw_kernel.h"

namespace lf::offload::detail {

namespace {

struct Vec {
  __m512 grad_scale, decay, lerp_coeff, beta2, one_minus_beta2, bc2_sqrt, eps, neg_step_size;
};

// Round to nearest even on the bits; NaN -> 0xFFFF (torch). [16 x fp32] -> [16 x u16]
inline __attribute__((always_inline)) __m512i bf16_bits(__m512 p) {
  const __m512i u = _mm512_castps_si512(p);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(p, p, _CMP_UNORD_Q);
  return _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0xFFFF));
}

template <bool kLerpSmall, bool kBf16, bool kMasked>
inline __attribute__((always_inline)) void step16(const AdamWSpan& x, int64_t i, __mmask16 k, const Vec& c) {
  auto load = [&](const float* a) { return kMasked ? _mm512_maskz_loadu_ps(k, a + i) : _mm512_loadu_ps(a + i); };
  auto store = [&](float* a, __m512 v) {
    if (kMasked) _mm512_mask_storeu_ps(a + i, k, v);
    else _mm512_storeu_ps(a + i, v);
  };
  const __m512 g = _mm512_mul_ps(load(x.grad), c.grad_scale);
  __m512 p = _mm512_mul_ps(load(x.param), c.decay);
  __m512 m = load(x.exp_avg);
  m = _mm512_fmadd_ps(c.lerp_coeff, _mm512_sub_ps(g, m), kLerpSmall ? m : g);
  __m512 v = _mm512_mul_ps(load(x.exp_avg_sq), c.beta2);
  v = _mm512_fmadd_ps(_mm512_mul_ps(c.one_minus_beta2, g), g, v);
  const __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(v), c.bc2_sqrt), c.eps);
  p = _mm512_add_ps(p, _mm512_div_ps(_mm512_mul_ps(c.neg_step_size, m), denom));
  store(x.param, p);
  store(x.exp_avg, m);
  store(x.exp_avg_sq, v);
  if constexpr (kBf16) {
    if (kMasked) _mm512_mask_cvtepi32_storeu_epi16(x.out_bf16 + i, k, bf16_bits(p));
    else _mm256_storeu_si256(reinterpret_cast<__m256i*>(x.out_bf16 + i), _mm512_cvtepi32_epi16(bf16_bits(p)));
  }
}

template <bool kLerpSmall, bool kBf16>
void loop(const AdamWSpan& x, const Vec& c) {
  int64_t i = 0;
  for (; i + 16 <= x.n; i += 16) step16<kLerpSmall, kBf16, false>(x, i, 0xFFFF, c);
  if (i < x.n) step16<kLerpSmall, kBf16, true>(x, i, static_cast<__mmask16>((1u << (x.n - i)) - 1), c);
}

}  // namespace

void adamw_avx512(const AdamWSpan& x, const AdamWConstants& k) {
  const Vec c{_mm512_set1_ps(k.grad_scale), _mm512_set1_ps(k.decay),           _mm512_set1_ps(k.lerp_coeff),
              _mm512_set1_ps(k.beta2),      _mm512_set1_ps(k.one_minus_beta2), _mm512_set1_ps(k.bc2_sqrt),
              _mm512_set1_ps(k.eps),        _mm512_set1_ps(k.neg_step_size)};
  const bool bf16 = x.out_bf16 != nullptr;
  if (k.lerp_small) bf16 ? loop<true, true>(x, c) : loop<true, false>(x, c);
  else bf16 ? loop<false, true>(x, c) : loop<false, false>(x, c);
}

}  // namespace lf::offload::detail
