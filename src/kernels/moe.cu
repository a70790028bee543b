// The mixture-of-experts kernels of lf/kernels/moe.h. combine and its backward: one block per token,
// each thread a 16-byte pack of the row (rows of up to 256 packs stay in registers across the k
// choices); the SwiGLU of [gate | up] halves elementwise, with swiglu.cu's formulas and roundings.
#include <algorithm>
#include <cmath>

#include "kernel_math.cuh"
#include "lf/kernels/moe.h"

namespace lf::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 16;

__device__ __forceinline__ float sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

template <typename T, int kV>
__global__ void __launch_bounds__(kThreads)
    combine_kernel(const T* __restrict__ y, const int64_t* __restrict__ slot_of, const T* __restrict__ w,
                   T* __restrict__ out, int64_t top_k, int64_t cols) {
  const int64_t n = blockIdx.x;
  for (int64_t p = threadIdx.x; p < cols / kV; p += blockDim.x) {
    float acc[kV];
#pragma unroll
    for (int i = 0; i < kV; ++i) acc[i] = 0.f;
    for (int64_t j = 0; j < top_k; ++j) {
      const auto v = load_pack<T, kV>(y + slot_of[n * top_k + j] * cols + p * kV);
      const float wj = w ? to_float(w[n * top_k + j]) : 1.f;
#pragma unroll
      for (int i = 0; i < kV; ++i) acc[i] += w ? round_to<T>(wj * to_float(v.v[i])) : to_float(v.v[i]);
    }
    Pack<T, kV> o;
#pragma unroll
    for (int i = 0; i < kV; ++i) o.v[i] = from_float<T>(acc[i]);
    store_pack<T, kV>(out + n * cols + p * kV, o);
  }
}

// Every thread of the block runs the j loop (block_sum syncs); a thread holds one pack of g's row.
template <typename T, int kV>
__global__ void __launch_bounds__(kThreads)
    combine_backward_kernel(const T* __restrict__ g, const T* __restrict__ y, const int64_t* __restrict__ slot_of,
                            const T* __restrict__ w, T* __restrict__ dy, float* __restrict__ dw, int64_t top_k,
                            int64_t cols) {
  const int64_t n = blockIdx.x, packs = cols / kV;
  for (int64_t j = 0; j < top_k; ++j) {
    const int64_t slot = slot_of[n * top_k + j];
    const float wj = to_float(w[n * top_k + j]);
    float dot = 0.f;
    for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
      const auto gv = load_pack<T, kV>(g + n * cols + p * kV);
      Pack<T, kV> d;
      if (dw) {
        const auto yv = load_pack<T, kV>(y + slot * cols + p * kV);
#pragma unroll
        for (int i = 0; i < kV; ++i) dot += to_float(yv.v[i]) * to_float(gv.v[i]);
      }
#pragma unroll
      for (int i = 0; i < kV; ++i) d.v[i] = from_float<T>(to_float(gv.v[i]) * wj);
      store_pack<T, kV>(dy + slot * cols + p * kV, d);
    }
    if (dw) {
      dot = block_sum(dot);
      if (threadIdx.x == 0) dw[n * top_k + j] = dot;
    }
  }
}

// The experts' SwiGLU on [gate | up] rows, kV elements a thread (16-byte packs where inter and the
// pointers allow, else 1): the same per-element math either way, so the results are bit-equal.
// e counts packs; a pack never straddles a row (inter % kV == 0).
template <typename T, int kV>
__global__ void __launch_bounds__(kThreads)
    swiglu_halves_kernel(const T* __restrict__ h, T* __restrict__ out, int64_t rows, int64_t inter) {
  const int64_t packs = inter / kV;
  for (int64_t e = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; e < rows * packs; e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = e / packs, i = (e % packs) * kV;
    const auto g = load_pack<T, kV>(h + r * 2 * inter + i), u = load_pack<T, kV>(h + r * 2 * inter + inter + i);
    Pack<T, kV> o;
#pragma unroll
    for (int j = 0; j < kV; ++j) {
      const float x = to_float(g.v[j]);
      o.v[j] = from_float<T>(round_to<T>(x / (1.f + expf(-x))) * to_float(u.v[j]));
    }
    store_pack<T, kV>(out + r * inter + i, o);
  }
}

template <typename T, int kV>
__global__ void __launch_bounds__(kThreads)
    swiglu_halves_backward_kernel(const T* __restrict__ h, const T* __restrict__ dout, T* __restrict__ dh,
                                  int64_t rows, int64_t inter) {
  const int64_t packs = inter / kV;
  for (int64_t e = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; e < rows * packs; e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = e / packs, i = (e % packs) * kV;
    const auto g = load_pack<T, kV>(h + r * 2 * inter + i), u = load_pack<T, kV>(h + r * 2 * inter + inter + i);
    const auto dd = load_pack<T, kV>(dout + r * inter + i);
    Pack<T, kV> dg, du;
#pragma unroll
    for (int j = 0; j < kV; ++j) {
      const float x = to_float(g.v[j]), d = to_float(dd.v[j]), sg = sigmoid(x);
      dg.v[j] = from_float<T>(round_to<T>(d * to_float(u.v[j])) * sg * (1.f + x * (1.f - sg)));
      du.v[j] = from_float<T>(d * round_to<T>(x / (1.f + expf(-x))));
    }
    store_pack<T, kV>(dh + r * 2 * inter + i, dg);
    store_pack<T, kV>(dh + r * 2 * inter + inter + i, du);
  }
}

int64_t elementwise_blocks(int64_t n) {
  return std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads,
                                                int64_t{multiprocessor_count()} * kBlocksPerSm));
}

}  // namespace

void moe_combine(const MoeCombineArgs& a, Stream stream) {
  if (a.tokens < 0 || a.top_k <= 0 || a.cols <= 0) fail("moe_combine", "bad sizes");
  if (a.tokens == 0) return;
  if (!a.y || !a.slot_of || !a.out) fail("moe_combine", "null pointer");
  auto* s = static_cast<cudaStream_t>(stream);
  dispatch_dtype(a.dtype, "moe_combine", [&]<typename T>() {
    constexpr int kV = 16 / sizeof(T);
    const auto* y = static_cast<const T*>(a.y);
    const auto* w = static_cast<const T*>(a.weights);
    auto* o = static_cast<T*>(a.out);
    if (a.cols % kV == 0 && all_aligned16(a.y, a.out)) {
      auto* k = &combine_kernel<T, kV>;
      LF_LAUNCH(k, dim3(static_cast<unsigned>(a.tokens)), dim3(kThreads), 0, s, y, a.slot_of, w, o, a.top_k, a.cols);
    } else {
      auto* k = &combine_kernel<T, 1>;
      LF_LAUNCH(k, dim3(static_cast<unsigned>(a.tokens)), dim3(kThreads), 0, s, y, a.slot_of, w, o, a.top_k, a.cols);
    }
  });
  check_launch("moe_combine");
}

void moe_combine_backward(const MoeCombineBackwardArgs& a, Stream stream) {
  if (a.tokens < 0 || a.top_k <= 0 || a.cols <= 0) fail("moe_combine_backward", "bad sizes");
  if (a.tokens == 0) return;
  if (!a.g || !a.y || !a.slot_of || !a.weights || !a.dy) fail("moe_combine_backward", "null pointer");
  auto* s = static_cast<cudaStream_t>(stream);
  dispatch_dtype(a.dtype, "moe_combine_backward", [&]<typename T>() {
    constexpr int kV = 16 / sizeof(T);
    const auto* g = static_cast<const T*>(a.g);
    const auto* y = static_cast<const T*>(a.y);
    const auto* w = static_cast<const T*>(a.weights);
    auto* dy = static_cast<T*>(a.dy);
    if (a.cols % kV == 0 && all_aligned16(a.g, a.y, a.dy)) {
      auto* k = &combine_backward_kernel<T, kV>;
      LF_LAUNCH(k, dim3(static_cast<unsigned>(a.tokens)), dim3(kThreads), 0, s, g, y, a.slot_of, w, dy, a.dweights,
                a.top_k, a.cols);
    } else {
      auto* k = &combine_backward_kernel<T, 1>;
      LF_LAUNCH(k, dim3(static_cast<unsigned>(a.tokens)), dim3(kThreads), 0, s, g, y, a.slot_of, w, dy, a.dweights,
                a.top_k, a.cols);
    }
  });
  check_launch("moe_combine_backward");
}

void moe_swiglu_halves(const MoeSwigluArgs& a, Stream stream) {
  if (a.rows < 0 || a.inter <= 0) fail("moe_swiglu_halves", "bad sizes");
  if (a.rows == 0) return;
  if (!a.h || !a.out) fail("moe_swiglu_halves", "null pointer");
  auto* s = static_cast<cudaStream_t>(stream);
  dispatch_dtype(a.dtype, "moe_swiglu_halves", [&]<typename T>() {
    constexpr int kV = 16 / sizeof(T);
    const bool packed = a.vectorized && a.inter % kV == 0 && all_aligned16(a.h, a.out);
    auto* k = packed ? &swiglu_halves_kernel<T, kV> : &swiglu_halves_kernel<T, 1>;
    LF_LAUNCH(k, dim3(static_cast<unsigned>(elementwise_blocks(a.rows * a.inter / (packed ? kV : 1)))), dim3(kThreads),
              0, s, static_cast<const T*>(a.h), static_cast<T*>(a.out), a.rows, a.inter);
  });
  check_launch("moe_swiglu_halves");
}

void moe_swiglu_halves_backward(const MoeSwigluBackwardArgs& a, Stream stream) {
  if (a.rows < 0 || a.inter <= 0) fail("moe_swiglu_halves_backward", "bad sizes");
  if (a.rows == 0) return;
  if (!a.h || !a.dout || !a.dh) fail("moe_swiglu_halves_backward", "null pointer");
  auto* s = static_cast<cudaStream_t>(stream);
  dispatch_dtype(a.dtype, "moe_swiglu_halves_backward", [&]<typename T>() {
    constexpr int kV = 16 / sizeof(T);
    const bool packed = a.vectorized && a.inter % kV == 0 && all_aligned16(a.h, a.dout, a.dh);
    auto* k = packed ? &swiglu_halves_backward_kernel<T, kV> : &swiglu_halves_backward_kernel<T, 1>;
    LF_LAUNCH(k, dim3(static_cast<unsigned>(elementwise_blocks(a.rows * a.inter / (packed ? kV : 1)))), dim3(kThreads),
              0, s, static_cast<const T*>(a.h), static_cast<const T*>(a.dout), static_cast<T*>(a.dh), a.rows, a.inter);
  });
  check_launch("moe_swiglu_halves_backward");
}

}  // namespace lf::kernels
