// The fused 4-bit GEMM for few rows; see lf/kernels/dequant_gemv_4bit.h.
#include <algorithm>

#include "dequant_4bit_scale.cuh"
#include "kernel_math.cuh"
#include "lf/kernels/dequant_gemv_4bit.h"

namespace lf::kernels {
namespace {

constexpr int kWarps = 8;

template <typename T>
__global__ void __launch_bounds__(kWarps * 32) dequant_gemv_4bit_kernel(const Gemv4Args a) {
  const int lane = threadIdx.x % 32;
  const int64_t col = int64_t{blockIdx.x} * kWarps + threadIdx.x / 32;
  if (col >= a.n) return;  // a whole warp: no shuffle is left half-done
  const T* x = static_cast<const T*>(a.x);
  float acc[kGemv4MaxRows] = {};
  for (int64_t k0 = int64_t{lane} * 16; k0 < a.k; k0 += 32 * 16) {
    const int64_t e = col * a.k + k0;  // the first of 16 weights, all in one block
    const auto bytes = load_pack<uint8_t, 8>(a.w.data + e / 2);
    const float s = block_scale(a.w, e / a.w.blocksize);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const uint8_t v = bytes.v[j / 2];
      const float w = to_float(from_float<T>(mul_rn(a.w.code[j % 2 ? v & 15 : v >> 4], s)));
#pragma unroll
      for (int r = 0; r < kGemv4MaxRows; ++r)
        if (r < a.m) acc[r] += to_float(x[r * a.k + k0 + j]) * w;
    }
  }
#pragma unroll
  for (int r = 0; r < kGemv4MaxRows; ++r) {
    if (r >= a.m) break;
    const float sum = warp_sum(acc[r]);
    if (lane == 0) static_cast<T*>(a.y)[r * a.n + col] = from_float<T>(sum);
  }
}

}  // namespace

void dequant_gemv_4bit(const Gemv4Args& a, Stream stream) {
  if (a.m < 0 || a.m > kGemv4MaxRows || a.n < 0 || a.k % 16 || a.w.blocksize % 16 || a.w.n != a.n * a.k)
    fail("dequant_gemv_4bit", "bad sizes (m <= 8, k and blocksize multiples of 16, w.n = n * k)");
  if (a.m == 0 || a.n == 0) return;
  if (!a.x || !a.y || !a.w.data || !a.w.code || reinterpret_cast<uintptr_t>(a.w.data) % 8)
    fail("dequant_gemv_4bit", "null or misaligned pointer");
  auto* s = static_cast<cudaStream_t>(stream);
  dispatch_dtype(a.w.dtype, "dequant_gemv_4bit", [&]<typename T>() {
    auto* k = &dequant_gemv_4bit_kernel<T>;
    LF_LAUNCH(k, dim3(static_cast<unsigned>((a.n + kWarps - 1) / kWarps)), dim3(kWarps * 32), 0, s, a);
  });
  check_launch("dequant_gemv_4bit");
}

}  // namespace lf::kernels
