// The FP8 GEMM's output scaling in place; see lf/kernels/fp8_output_scale.h. Bit-equal to ATen's two
// multiplies: fp8_output_scale_test.cpp on the GPU (kernels_test) and in the CPU emulation (kernels_emu_test).
#include <algorithm>
#include <cstdint>

#include "kernel_math.cuh"
#include "lf/kernels/fp8_output_scale.h"

namespace lf::kernels {
namespace {

constexpr int kThreads = 256;

// Grid-stride over packs of kV elements (16 bytes): a pack lies in one row (cols % kV == 0).
template <typename T, int kV>
__global__ void __launch_bounds__(kThreads) fp8_output_scale_kernel(const Fp8OutputScaleArgs a) {
  T* y = static_cast<T*>(a.y);
  const int64_t packs = a.rows * a.cols / kV;
  for (int64_t p = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; p < packs; p += int64_t{gridDim.x} * blockDim.x) {
    const int64_t at = p * kV, row = at / a.cols, col = at - row * a.cols;
    auto v = load_pack<T, kV>(y + at);
    const float r = a.row_scale[row];
#pragma unroll
    for (int i = 0; i < kV; ++i) {
      float e = round_to<T>(to_float(v.v[i]) * r);  // the first multiply's result, stored in T
      if (a.col_scale) e = e * a.col_scale[col + i];
      v.v[i] = from_float<T>(e);
    }
    store_pack<T, kV>(y + at, v);
  }
}

}  // namespace

void fp8_output_scale(const Fp8OutputScaleArgs& a, Stream stream) {
  if (a.rows < 0 || a.cols < 0) fail("fp8_output_scale", "negative size");
  if (a.rows == 0 || a.cols == 0) return;
  if (!a.y || !a.row_scale) fail("fp8_output_scale", "null pointer");
  auto* s = static_cast<cudaStream_t>(stream);
  dispatch_dtype(a.dtype, "fp8_output_scale", [&]<typename T>() {
    constexpr int kV = 16 / sizeof(T);
    if (a.cols % kV != 0 || reinterpret_cast<uintptr_t>(a.y) % 16 != 0)
      fail("fp8_output_scale", "cols not a multiple of a 16-byte pack or y not 16-byte aligned");
    const int64_t packs = a.rows * a.cols / kV;
    const int64_t most = static_cast<int64_t>(multiprocessor_count()) * 8;
    const auto grid = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((packs + kThreads - 1) / kThreads, most)));
    auto* k = &fp8_output_scale_kernel<T, kV>;
    LF_LAUNCH(k, dim3(grid), dim3(kThreads), 0, s, a);
  });
  check_launch("fp8_output_scale");
}

}  // namespace lf::kernels
