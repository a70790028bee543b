// FP8 training's cast on the GPU; see lf/kernels/fp8_cast.h. Bit-equal to quant::fp8_cast (ATen's, itself
// torchao's): checked on the GPU by fp8_gpu_test (scripts/device/fp8_bench.sh) and on the CPU through the
// emulation (cpu_emulation_fp8.h; tests/kernels/fp8_cast_kernel_test.cpp in kernels_emu_test).
#include <algorithm>
#include <cstdint>

#include "fp8_cast_math.cuh"
#include "kernel_math.cuh"
#include "lf/kernels/fp8_cast.h"

namespace lf::kernels {
namespace {

// Rowwise: 256 threads a row, each moving 8 elements at once (16-byte loads of bf16), the longest row
// (kFp8RowMaxCols) 12 such packs a thread in registers. The first version (1024 threads, one 2-byte element
// at a time) cast a [8192, 3584] bf16 tensor in 0.243 ms on the H200, ~10x its bandwidth's time.
constexpr int kRowThreads = 256;
constexpr int kVec = kFp8Vec;
constexpr int kVecsPerThread = static_cast<int>(kFp8RowMaxCols / (kRowThreads * kVec));
static_assert(kFp8RowMaxCols % (kRowThreads * kVec) == 0);
constexpr int kThreads = 256;

// One block per row: the row read once into registers (packs of 8: cols % 8 == 0 and x 32-byte aligned,
// fp8_cast_op's condition), multiplied by the column factors if any, its amax, its scale, its FP8 bytes
// written 8 at a time. Two blocks an SM: with every load in flight before the factors, ptxas wanted 136
// registers (one block an SM); bounded, it fits 128 without spills (scripts/check_cuda_sources.sh). 2-byte
// rows held as Words take 78 (bf16 and fp16; float's 12 packs still fill the 128).
template <typename T>
__global__ void __launch_bounds__(kRowThreads, 2) fp8_rowwise_kernel(const Fp8CastArgs a) {
  const int64_t row = blockIdx.x;
  const T* x = static_cast<const T*>(a.x) + row * a.cols;
  Words<T> w[kVecsPerThread];
#pragma unroll
  for (int i = 0; i < kVecsPerThread; ++i) {  // every pack's load in flight at once
    const int64_t c = (threadIdx.x + int64_t{i} * kRowThreads) * kVec;
    if (c < a.cols) w[i] = as_words(load_pack<T, kVec>(x + c));
  }
  float m = 0.f;
#pragma unroll
  for (int i = 0; i < kVecsPerThread; ++i) {
    const int64_t c = (threadIdx.x + int64_t{i} * kRowThreads) * kVec;
    if (c < a.cols) apply_factors<T>(w[i], a.col_mul, c, m);
  }
  const float s = scale_of(block_max(m), a.e5m2, a.pow2);
  if (threadIdx.x == 0) a.scale[row] = s;
  uint8_t* out = a.out + row * a.cols;
#pragma unroll
  for (int i = 0; i < kVecsPerThread; ++i) {
    const int64_t c = (threadIdx.x + int64_t{i} * kRowThreads) * kVec;
    if (c < a.cols) store_fp8<T>(out, c, w[i], s, a.e5m2);
  }
}

// 2-byte rows of at most kWarpRowPacks * 32 packs (4,096: the hidden sizes): a warp a row, 8 rows a block,
// the reduction in shuffles. A block a row (above) gave such rows 1-2 packs a thread and two block-wide
// syncs between a 7 KB read and its write: 0.095 ms for [8192, 3584] on the H100, ~0.9 TB/s (2026-12-06).
// The max is exact in any order, so both kernels write the same bytes.
constexpr int kWarpRowPacks = 16;
constexpr int kRowsPerBlock = kThreads / 32;

template <typename T>
__global__ void __launch_bounds__(kThreads) fp8_rowwise_warp_kernel(const Fp8CastArgs a) {
  const int64_t row = int64_t{blockIdx.x} * kRowsPerBlock + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t packs = a.cols / kVec;
  if (row >= a.rows) return;  // a dead warp returns whole: the shuffles are within the warp
  const T* x = static_cast<const T*>(a.x) + row * a.cols;
  Words<T> w[kWarpRowPacks];
#pragma unroll
  for (int i = 0; i < kWarpRowPacks; ++i) {  // every pack's load in flight at once
    const int64_t p = lane + int64_t{i} * 32;
    if (p < packs) w[i] = as_words(load_pack<T, kVec>(x + p * kVec));
  }
  float m = 0.f;
#pragma unroll
  for (int i = 0; i < kWarpRowPacks; ++i) {
    const int64_t p = lane + int64_t{i} * 32;
    if (p < packs) apply_factors<T>(w[i], a.col_mul, p * kVec, m);
  }
  const float s = scale_of(warp_max(m), a.e5m2, a.pow2);
  if (lane == 0) a.scale[row] = s;
  uint8_t* out = a.out + row * a.cols;
#pragma unroll
  for (int i = 0; i < kWarpRowPacks; ++i) {
    const int64_t p = lane + int64_t{i} * 32;
    if (p < packs) store_fp8<T>(out, p * kVec, w[i], s, a.e5m2);
  }
}

// Tensorwise, pass 1: max |x| into *a.amax (zeroed): atomicMax on the bits orders non-negative floats.
template <typename T>
__global__ void __launch_bounds__(kThreads) fp8_amax_kernel(const Fp8CastArgs a) {
  const T* x = static_cast<const T*>(a.x);
  const int64_t n = a.rows * a.cols;
  float m = 0.f;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    m = fmaxf(m, fabsf(to_float(x[i])));
  m = block_max(m);
  if (threadIdx.x == 0) atomicMax(reinterpret_cast<int*>(a.amax), __float_as_int(m));
}

// Tensorwise, pass 2: every block computes the scale from the amax on the device; block 0 writes it.
template <typename T>
__global__ void __launch_bounds__(kThreads) fp8_tensorwise_kernel(const Fp8CastArgs a) {
  const float s = scale_of(*a.amax, a.e5m2, a.pow2);
  if (blockIdx.x == 0 && threadIdx.x == 0) a.scale[0] = s;
  const T* x = static_cast<const T*>(a.x);
  const int64_t n = a.rows * a.cols;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    a.out[i] = to_fp8(to_float(x[i]), s, a.e5m2);
}

unsigned grid_for(int64_t n) {
  const int64_t most = static_cast<int64_t>(multiprocessor_count()) * 8;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, most)));
}

}  // namespace

void fp8_cast(const Fp8CastArgs& a, Stream stream) {
  if (a.rows < 0 || a.cols < 0) fail("fp8_cast", "negative size");
  if (a.rows == 0 || a.cols == 0) return;
  if (!a.x || !a.out || !a.scale || (!a.rowwise && !a.amax)) fail("fp8_cast", "null pointer");
  if (a.col_mul && !a.rowwise) fail("fp8_cast", "column factors are for the rowwise cast only");
  if (a.rowwise && a.cols > kFp8RowMaxCols) fail("fp8_cast", "a row longer than kFp8RowMaxCols");
  if (a.rowwise && (a.cols % kFp8RowPack != 0 || reinterpret_cast<uintptr_t>(a.x) % 32 != 0))
    fail("fp8_cast", "rowwise: cols not a multiple of kFp8RowPack or x not 32-byte aligned");
  if (a.col_mul && reinterpret_cast<uintptr_t>(a.col_mul) % 32 != 0) fail("fp8_cast", "col_mul not 32-byte aligned");
  auto* s = static_cast<cudaStream_t>(stream);
  dispatch_dtype(a.dtype, "fp8_cast", [&]<typename T>() {
    // 2-byte rows only: 16 packs of 8 floats would hold 128 registers a thread (1 block an SM). Not even
    // instantiated for float: it would be compiled (191 registers) and never launched.
    if constexpr (sizeof(T) == 2) {
      if (a.rowwise && a.cols <= int64_t{kWarpRowPacks} * 32 * kVec) {
        auto* k = &fp8_rowwise_warp_kernel<T>;
        LF_LAUNCH(k, dim3(static_cast<unsigned>((a.rows + kRowsPerBlock - 1) / kRowsPerBlock)), dim3(kThreads), 0, s,
                  a);
        return;
      }
    }
    if (a.rowwise) {
      auto* k = &fp8_rowwise_kernel<T>;
      LF_LAUNCH(k, dim3(static_cast<unsigned>(a.rows)), dim3(kRowThreads), 0, s, a);
      return;
    }
    if (cudaMemsetAsync(a.amax, 0, sizeof(float), s) != cudaSuccess) fail("fp8_cast", "cudaMemsetAsync");
    auto* amax = &fp8_amax_kernel<T>;
    LF_LAUNCH(amax, dim3(grid_for(a.rows * a.cols)), dim3(kThreads), 0, s, a);
    auto* cast = &fp8_tensorwise_kernel<T>;
    LF_LAUNCH(cast, dim3(grid_for(a.rows * a.cols)), dim3(kThreads), 0, s, a);
  });
  check_launch("fp8_cast");
}

}  // namespace lf::kernels
