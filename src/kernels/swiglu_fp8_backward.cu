// SwiGLU's backward and the factored rowwise FP8 casts of its two gradients in one kernel; see
// lf/kernels/swiglu_fp8_backward.h. The gradients are swiglu.cu's expression (swiglu_math.cuh's gated_grads),
// the factors, scale and conversion fp8_cast.cu's (fp8_cast_math.cuh): the same functions, so the same bits.
#include <algorithm>
#include <cstdint>

#include "fp8_cast_math.cuh"
#include "kernel_math.cuh"
#include "lf/kernels/swiglu_fp8_backward.h"
#include "swiglu_math.cuh"

namespace lf::kernels {
namespace {

// A block a row (the MLP's intermediate sizes: 4,864 at 0.5B, 18,944 at 7B), each thread holding its packs of
// gate, up and dout as words (three loads in flight a pack), then dgate's and dup's factored products in their
// place: 12 words a pack. 256 threads for rows of up to 8,192 (4 packs a thread), 512 beyond (6 packs: 24,576);
// 128 registers a thread at most either way (512 threads an SM).
constexpr int kSmallThreads = 256, kSmallPacks = 4;
constexpr int kLargeThreads = 512, kLargePacks = static_cast<int>(kFp8RowMaxCols / (kLargeThreads * kFp8Vec));
static_assert(kFp8RowMaxCols % (kLargeThreads * kFp8Vec) == 0);
constexpr int kRegistersPerSm = 65536, kMaxRegisters = 128;

template <typename T, int kThreads, int kPacks>
__global__ void __launch_bounds__(kThreads, kRegistersPerSm / (kThreads * kMaxRegisters))
    swiglu_fp8_backward_kernel(const SwigluFp8BackwardArgs a) {
  const int64_t row = blockIdx.x, base = row * a.cols, packs = a.cols / kFp8Vec;
  const auto* gate = static_cast<const T*>(a.gate) + base;
  const auto* up = static_cast<const T*>(a.up) + base;
  const auto* dout = static_cast<const T*>(a.dout) + base;
  Words<T> wg[kPacks], wu[kPacks], wd[kPacks];  // gate's and up's packs, then T(dgate * f) and T(dup * f)
#pragma unroll
  for (int i = 0; i < kPacks; ++i) {  // every pack's loads in flight at once
    const int64_t p = threadIdx.x + int64_t{i} * kThreads;
    if (p < packs) {
      wg[i] = as_words(load_pack<T, kFp8Vec>(gate + p * kFp8Vec));
      wu[i] = as_words(load_pack<T, kFp8Vec>(up + p * kFp8Vec));
      wd[i] = as_words(load_pack<T, kFp8Vec>(dout + p * kFp8Vec));
    }
  }
  float mg = 0.f, mu = 0.f;
#pragma unroll
  for (int i = 0; i < kPacks; ++i) {
    const int64_t p = threadIdx.x + int64_t{i} * kThreads;
    if (p >= packs) continue;
    const auto gv = as_pack<T>(wg[i]), uv = as_pack<T>(wu[i]), dv = as_pack<T>(wd[i]);
    Pack<T, kFp8Vec> og, ou;
#pragma unroll
    for (int j = 0; j < kFp8Vec; ++j) gated_grads<T, false>(gv.v[j], uv.v[j], dv.v[j], og.v[j], ou.v[j]);
    store_pack<T, kFp8Vec>(static_cast<T*>(a.dgate) + base + p * kFp8Vec, og);
    store_pack<T, kFp8Vec>(static_cast<T*>(a.dup) + base + p * kFp8Vec, ou);
    wg[i] = as_words(og);
    wu[i] = as_words(ou);
    apply_factors<T>(wg[i], a.gate_mul, p * kFp8Vec, mg);
    apply_factors<T>(wu[i], a.up_mul, p * kFp8Vec, mu);
  }
  const float sg = scale_of(block_max(mg), a.e5m2, a.pow2);
  const float su = scale_of(block_max(mu), a.e5m2, a.pow2);
  if (threadIdx.x == 0) {
    a.gate_scale[row] = sg;
    a.up_scale[row] = su;
  }
#pragma unroll
  for (int i = 0; i < kPacks; ++i) {
    const int64_t p = threadIdx.x + int64_t{i} * kThreads;
    if (p >= packs) continue;
    store_fp8<T>(a.gate_fp8 + base, p * kFp8Vec, wg[i], sg, a.e5m2);
    store_fp8<T>(a.up_fp8 + base, p * kFp8Vec, wu[i], su, a.e5m2);
  }
}

void check(const SwigluFp8BackwardArgs& a) {
  constexpr const char* kName = "swiglu_fp8_backward";
  if (a.rows < 0 || a.cols < 0) fail(kName, "negative size");
  if (!a.gate || !a.up || !a.dout || !a.dgate || !a.dup || !a.gate_mul || !a.up_mul || !a.gate_fp8 || !a.up_fp8 ||
      !a.gate_scale || !a.up_scale)
    fail(kName, "null pointer");
  if (a.cols > kFp8RowMaxCols || a.cols % kFp8RowPack != 0)
    fail(kName, "cols not a multiple of kFp8RowPack or longer than kFp8RowMaxCols");
  if (!all_aligned16(a.gate, a.up, a.dout, a.dgate, a.dup))
    fail(kName, "gate / up / dout / dgate / dup not 16-byte aligned");
  if (reinterpret_cast<uintptr_t>(a.gate_mul) % 32 != 0 || reinterpret_cast<uintptr_t>(a.up_mul) % 32 != 0 ||
      reinterpret_cast<uintptr_t>(a.gate_fp8) % 8 != 0 || reinterpret_cast<uintptr_t>(a.up_fp8) % 8 != 0)
    fail(kName, "factors not 32-byte aligned or fp8 not 8-byte aligned");
}

}  // namespace

void swiglu_fp8_backward(const SwigluFp8BackwardArgs& a, Stream stream) {
  check(a);
  if (a.rows == 0 || a.cols == 0) return;
  auto* s = static_cast<cudaStream_t>(stream);
  dispatch_dtype(a.dtype, "swiglu_fp8_backward", [&]<typename T>() {
    if constexpr (sizeof(T) != 2) {
      fail("swiglu_fp8_backward", "float32: bf16 or fp16 only");
    } else if (a.cols <= int64_t{kSmallThreads} * kSmallPacks * kFp8Vec) {
      auto* k = &swiglu_fp8_backward_kernel<T, kSmallThreads, kSmallPacks>;
      LF_LAUNCH(k, dim3(static_cast<unsigned>(a.rows)), dim3(kSmallThreads), 0, s, a);
    } else {
      auto* k = &swiglu_fp8_backward_kernel<T, kLargeThreads, kLargePacks>;
      LF_LAUNCH(k, dim3(static_cast<unsigned>(a.rows)), dim3(kLargeThreads), 0, s, a);
    }
  });
  check_launch("swiglu_fp8_backward");
}

}  // namespace lf::kernels
