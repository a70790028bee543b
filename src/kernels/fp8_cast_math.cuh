#pragma once
// The rowwise FP8 cast's arithmetic (torchao's amax_to_scale, the saturated conversion) and its packs of
// 2-byte elements held as 32-bit words, shared by fp8_cast.cu and swiglu_fp8.cu so that both write the same
// bytes and scales: one definition, one rounding order (and the column factors of fp8_cast_scaled_columns'
// cast, for swiglu_fp8_backward.cu).
#ifdef LF_KERNELS_EMULATE
#include "cpu_emulation_fp8.h"
#else
#include <cuda_fp8.h>
#endif

#include <cstdint>
#include <cstring>

#include "kernel_math.cuh"
#include "lf/kernels/fp8_cast.h"

namespace lf::kernels {

constexpr int kFp8Vec = static_cast<int>(kFp8RowPack);  // elements of a pack: 16 bytes of bf16, 32 of float32

__device__ __forceinline__ float fp8_limit(bool e5m2) { return e5m2 ? 57344.f : 448.f; }

// torchao's amax_to_scale: float64 reciprocal of max(amax, 1e-12) times fmax, one rounding to float32;
// its power-of-two rounding down, exp2(floor(log2(s))), is s's exponent bits (s is a normal float).
__device__ __forceinline__ float scale_of(float amax, bool e5m2, bool pow2) {
  const double r = __drcp_rn(fmax(static_cast<double>(amax), 1e-12));
  const float s = __double2float_rn(__dmul_rn(r, static_cast<double>(fp8_limit(e5m2))));
  return pow2 ? __int_as_float(__float_as_int(s) & 0x7f800000) : s;
}

// float32(x) * scale, saturated, rounded to nearest even (c10's Float8 conversion for |v| <= fmax).
__device__ __forceinline__ uint8_t to_fp8(float v, float scale, bool e5m2) {
  const float lim = fp8_limit(e5m2);
  const float y = fminf(fmaxf(__fmul_rn(v, scale), -lim), lim);
  return __nv_cvt_float_to_fp8(y, __NV_SATFINITE, e5m2 ? __NV_E5M2 : __NV_E4M3);
}

// A pack of 2-byte T held as 32-bit words, two elements a register. Held as Pack<T, 8>, the row of 2-byte
// T came to ptxas as one 16-bit PTX register an element (the loads split, the factors' results rounded one
// element at a time), each given a whole 32-bit register: the warp kernel's 16 bf16 packs took 128
// registers, not 64 (172 a thread, one block an SM; 96 as words). Only the bits' container changes: every
// element goes through the same conversions and arithmetic in the same order.
template <typename T>
using Words = Pack<uint32_t, static_cast<int>(kFp8Vec * sizeof(T) / 4)>;

template <typename T>
__device__ __forceinline__ Words<T> as_words(const Pack<T, kFp8Vec>& v) {
  static_assert(sizeof(Words<T>) == sizeof(Pack<T, kFp8Vec>));
  Words<T> w;
  memcpy(&w, &v, sizeof w);
  return w;
}

template <typename T>
__device__ __forceinline__ Pack<T, kFp8Vec> as_pack(const Words<T>& w) {
  Pack<T, kFp8Vec> v;
  memcpy(&v, &w, sizeof v);
  return v;
}

// w's FP8 bytes under scale s at out + c, 8 at a time.
template <typename T>
__device__ __forceinline__ void store_fp8(uint8_t* out, int64_t c, const Words<T>& w, float s, bool e5m2) {
  const auto v = as_pack<T>(w);
  Pack<uint8_t, kFp8Vec> q;
#pragma unroll
  for (int j = 0; j < kFp8Vec; ++j) q.v[j] = to_fp8(to_float(v.v[j]), s, e5m2);
  store_pack<uint8_t, kFp8Vec>(out + c, q);
}

// The pack w of x at column c times the column factors if any (x * f rounded to T, as ATen's multiply
// stores it), in place; m takes its max |x|. The kernels call it once every pack of the row is loaded: a pack
// multiplied as soon as it was loaded (the first version) made the next pack's load wait for this one (the
// SASS of the bf16 block-a-row kernel: one 16-byte load in flight a thread, then ~60 instructions), so a
// warp had 512 bytes in flight. The factors (one float a column, the same for every row) come from L1/L2,
// a pack in two 16-byte loads (col_mul is 32-byte aligned: fp8_cast_op).
template <typename T>
__device__ __forceinline__ void apply_factors(Words<T>& w, const float* col_mul, int64_t c, float& m) {
  auto v = as_pack<T>(w);
  if (col_mul) {
    const auto f = load_pack<float, kFp8Vec>(col_mul + c);
#pragma unroll
    for (int j = 0; j < kFp8Vec; ++j) v.v[j] = from_float<T>(to_float(v.v[j]) * f.v[j]);
    w = as_words(v);
  }
#pragma unroll
  for (int j = 0; j < kFp8Vec; ++j) m = fmaxf(m, fabsf(to_float(v.v[j])));
}

}  // namespace lf::kernels
