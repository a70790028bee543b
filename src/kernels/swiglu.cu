// SwiGLU's (and Gemma's GeGLU's) gate forward and backward, elementwise; see lf/kernels/swiglu.h. Rounds
// as the ATen path (act(g) in T, then the product in T; the backward from T(dout * up)) does, with ATen's
// silu / gelu(tanh) formulas and their backward in fp32.
#include <algorithm>
#include <cmath>

#include "kernel_math.cuh"
#include "swiglu_math.cuh"
#include "lf/kernels/swiglu.h"

namespace lf::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 16;

template <typename T, int kV, bool kGelu>
__global__ void __launch_bounds__(kThreads)
    swiglu_forward_kernel(const T* __restrict__ g, const T* __restrict__ u, T* __restrict__ out, int64_t packs) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < packs; i += int64_t{gridDim.x} * blockDim.x) {
    const auto gv = load_pack<T, kV>(g + i * kV), uv = load_pack<T, kV>(u + i * kV);
    Pack<T, kV> o;
#pragma unroll
    for (int j = 0; j < kV; ++j) o.v[j] = from_float<T>(round_to<T>(gate_act<kGelu>(to_float(gv.v[j]))) * to_float(uv.v[j]));
    store_pack<T, kV>(out + i * kV, o);
  }
}

template <typename T, int kV, bool kGelu>
__global__ void __launch_bounds__(kThreads)
    swiglu_backward_kernel(const T* __restrict__ g, const T* __restrict__ u, const T* __restrict__ dout,
                           T* __restrict__ dg, T* __restrict__ du, int64_t packs) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < packs; i += int64_t{gridDim.x} * blockDim.x) {
    const auto gv = load_pack<T, kV>(g + i * kV), uv = load_pack<T, kV>(u + i * kV);
    const auto dv = load_pack<T, kV>(dout + i * kV);
    Pack<T, kV> og, ou;
#pragma unroll
    for (int j = 0; j < kV; ++j) gated_grads<T, kGelu>(gv.v[j], uv.v[j], dv.v[j], og.v[j], ou.v[j]);
    store_pack<T, kV>(dg + i * kV, og);
    store_pack<T, kV>(du + i * kV, ou);
  }
}

int64_t blocks_for(int64_t packs) {
  return std::max<int64_t>(1, std::min<int64_t>((packs + kThreads - 1) / kThreads,
                                                int64_t{multiprocessor_count()} * kBlocksPerSm));
}

}  // namespace

void swiglu_forward(const SwigluForwardArgs& a, Stream stream) {
  if (a.n < 0) fail("swiglu_forward", "n < 0");
  if (a.n == 0) return;
  if (!a.gate || !a.up || !a.out) fail("swiglu_forward", "null pointer");
  auto* s = static_cast<cudaStream_t>(stream);
  dispatch_dtype(a.dtype, "swiglu_forward", [&]<typename T>() {
    constexpr int kV = 16 / sizeof(T);
    const auto* g = static_cast<const T*>(a.gate);
    const auto* u = static_cast<const T*>(a.up);
    auto* o = static_cast<T*>(a.out);
    if (a.n % kV == 0 && all_aligned16(a.gate, a.up, a.out)) {
      auto* k = a.gelu_tanh ? &swiglu_forward_kernel<T, kV, true> : &swiglu_forward_kernel<T, kV, false>;
      LF_LAUNCH(k, dim3(static_cast<unsigned>(blocks_for(a.n / kV))), dim3(kThreads), 0, s, g, u, o, a.n / kV);
    } else {
      auto* k = a.gelu_tanh ? &swiglu_forward_kernel<T, 1, true> : &swiglu_forward_kernel<T, 1, false>;
      LF_LAUNCH(k, dim3(static_cast<unsigned>(blocks_for(a.n))), dim3(kThreads), 0, s, g, u, o, a.n);
    }
  });
  check_launch("swiglu_forward");
}

void swiglu_backward(const SwigluBackwardArgs& a, Stream stream) {
  if (a.n < 0) fail("swiglu_backward", "n < 0");
  if (a.n == 0) return;
  if (!a.gate || !a.up || !a.dout || !a.dgate || !a.dup) fail("swiglu_backward", "null pointer");
  auto* s = static_cast<cudaStream_t>(stream);
  dispatch_dtype(a.dtype, "swiglu_backward", [&]<typename T>() {
    constexpr int kV = 16 / sizeof(T);
    const auto* g = static_cast<const T*>(a.gate);
    const auto* u = static_cast<const T*>(a.up);
    const auto* d = static_cast<const T*>(a.dout);
    auto* dg = static_cast<T*>(a.dgate);
    auto* du = static_cast<T*>(a.dup);
    if (a.n % kV == 0 && all_aligned16(a.gate, a.up, a.dout, a.dgate, a.dup)) {
      auto* k = a.gelu_tanh ? &swiglu_backward_kernel<T, kV, true> : &swiglu_backward_kernel<T, kV, false>;
      LF_LAUNCH(k, dim3(static_cast<unsigned>(blocks_for(a.n / kV))), dim3(kThreads), 0, s, g, u, d, dg, du, a.n / kV);
    } else {
      auto* k = a.gelu_tanh ? &swiglu_backward_kernel<T, 1, true> : &swiglu_backward_kernel<T, 1, false>;
      LF_LAUNCH(k, dim3(static_cast<unsigned>(blocks_for(a.n))), dim3(kThreads), 0, s, g, u, d, dg, du, a.n);
    }
  });
  check_launch("swiglu_backward");
}

}  // namespace lf::kernels
