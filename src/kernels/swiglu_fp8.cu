// SwiGLU's forward and the rowwise FP8 cast of its output in one kernel; see lf/kernels/swiglu_fp8.h. The
// activation is swiglu.cu's expression (swiglu_math.cuh), the scale and conversion fp8_cast.cu's
// (fp8_cast_math.cuh): the same functions, so the same bits.
#include <algorithm>
#include <cstdint>

#include "fp8_cast_math.cuh"
#include "kernel_math.cuh"
#include "lf/kernels/swiglu_fp8.h"
#include "swiglu_math.cuh"

namespace lf::kernels {
namespace {

constexpr int kThreads = 256;
// Rows of up to 2,048: a warp a row, 8 packs a lane, 8 rows a block (16 packs, fp8_cast.cu's warp kernel's, spilled:
// act's words and the hoisted loads of gate and up); longer ones (the MLP's intermediate sizes: 4,864 at 0.5B,
// 18,944 at 7B) a block a row, up to 12 packs a thread.
constexpr int kWarpPacks = 8;
constexpr int kBlockPacks = static_cast<int>(kFp8RowMaxCols / (kThreads * kFp8Vec));
static_assert(kFp8RowMaxCols % (kThreads * kFp8Vec) == 0);

// One row per kGroup threads (32: a warp, kThreads: the block), each holding up to kPacks packs of the row's
// act as words while the row's amax is reduced; act goes out as soon as it is computed, its FP8 bytes once
// the scale is known. gate and up are read once. Two blocks an SM, as fp8_cast.cu's kernels.
template <typename T, int kGroup, int kPacks>
__global__ void __launch_bounds__(kThreads, 2)
    swiglu_fp8_kernel(const T* __restrict__ gate, const T* __restrict__ up, T* __restrict__ out,
                      uint8_t* __restrict__ fp8, float* __restrict__ scale, int64_t rows, int64_t cols, bool e5m2,
                      bool pow2) {
  static_assert(kGroup == 32 || kGroup == kThreads);
  const int64_t row = int64_t{blockIdx.x} * (kThreads / kGroup) + threadIdx.x / kGroup;
  const int lane = static_cast<int>(threadIdx.x % kGroup);
  // A dead warp returns whole (its shuffles are its own); a block a row has no dead threads' rows.
  if (kGroup == 32 && row >= rows) return;
  const int64_t base = row * cols, packs = cols / kFp8Vec;
  Words<T> w[kPacks], wu[kPacks];  // gate's packs, then act's in their place
#pragma unroll
  for (int i = 0; i < kPacks; ++i) {  // every pack's loads in flight at once
    const int64_t p = lane + int64_t{i} * kGroup;
    if (p < packs) {
      w[i] = as_words(load_pack<T, kFp8Vec>(gate + base + p * kFp8Vec));
      wu[i] = as_words(load_pack<T, kFp8Vec>(up + base + p * kFp8Vec));
    }
  }
  float m = 0.f;
#pragma unroll
  for (int i = 0; i < kPacks; ++i) {
    const int64_t p = lane + int64_t{i} * kGroup;
    if (p >= packs) continue;
    const auto gv = as_pack<T>(w[i]), uv = as_pack<T>(wu[i]);
    Pack<T, kFp8Vec> o;
#pragma unroll
    for (int j = 0; j < kFp8Vec; ++j) {
      o.v[j] = from_float<T>(round_to<T>(gate_act<false>(to_float(gv.v[j]))) * to_float(uv.v[j]));
      m = fmaxf(m, fabsf(to_float(o.v[j])));
    }
    store_pack<T, kFp8Vec>(out + base + p * kFp8Vec, o);
    w[i] = as_words(o);
  }
  const float s = scale_of(kGroup == 32 ? warp_max(m) : block_max(m), e5m2, pow2);
  if (lane == 0) scale[row] = s;
#pragma unroll
  for (int i = 0; i < kPacks; ++i) {
    const int64_t p = lane + int64_t{i} * kGroup;
    if (p < packs) store_fp8<T>(fp8 + base, p * kFp8Vec, w[i], s, e5m2);
  }
}

void check(const SwigluFp8Args& a) {
  if (a.rows < 0 || a.cols < 0) fail("swiglu_fp8_forward", "negative size");
  if (!a.gate || !a.up || !a.out || !a.fp8 || !a.scale) fail("swiglu_fp8_forward", "null pointer");
  if (a.cols > kFp8RowMaxCols || a.cols % kFp8RowPack != 0)
    fail("swiglu_fp8_forward", "cols not a multiple of kFp8RowPack or longer than kFp8RowMaxCols");
  if (!all_aligned16(a.gate, a.up, a.out) || reinterpret_cast<uintptr_t>(a.fp8) % 8 != 0)
    fail("swiglu_fp8_forward", "gate / up / out not 16-byte aligned or fp8 not 8-byte aligned");
}

}  // namespace

void swiglu_fp8_forward(const SwigluFp8Args& a, Stream stream) {
  check(a);
  if (a.rows == 0 || a.cols == 0) return;
  auto* s = static_cast<cudaStream_t>(stream);
  dispatch_dtype(a.dtype, "swiglu_fp8_forward", [&]<typename T>() {
    if constexpr (sizeof(T) != 2) {
      fail("swiglu_fp8_forward", "float32: bf16 or fp16 only");
    } else {
      const auto* g = static_cast<const T*>(a.gate);
      const auto* u = static_cast<const T*>(a.up);
      auto* o = static_cast<T*>(a.out);
      if (a.cols <= int64_t{kWarpPacks} * 32 * kFp8Vec) {
        auto* k = &swiglu_fp8_kernel<T, 32, kWarpPacks>;
        const auto blocks = static_cast<unsigned>((a.rows + kThreads / 32 - 1) / (kThreads / 32));
        LF_LAUNCH(k, dim3(blocks), dim3(kThreads), 0, s, g, u, o, a.fp8, a.scale, a.rows, a.cols, a.e5m2, a.pow2);
      } else {
        auto* k = &swiglu_fp8_kernel<T, kThreads, kBlockPacks>;
        LF_LAUNCH(k, dim3(static_cast<unsigned>(a.rows)), dim3(kThreads), 0, s, g, u, o, a.fp8, a.scale, a.rows,
                  a.cols, a.e5m2, a.pow2);
      }
    }
  });
  check_launch("swiglu_fp8_forward");
}

}  // namespace lf::kernels
