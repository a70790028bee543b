#pragma once
// What every fused kernel shares: CUDA (or its CPU emulation, cpu_emulation.h), 16-byte packs,
// conversions that round as ATen does (round-to-nearest-even), and warp/block sums and maxima.
// Block sizes are multiples of 32 and every thread of a block calls block_sum / block_max (they sync).
#ifdef LF_KERNELS_EMULATE
#include "cpu_emulation.h"
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#define LF_DYNAMIC_SHARED(type, name)                             \
  extern __shared__ __align__(16) unsigned char lf_dynamic_smem[]; \
  type* name = reinterpret_cast<type*>(lf_dynamic_smem)
// `kernel` must be one token (a function pointer): template arguments' commas would split it.
#define LF_LAUNCH(kernel, grid, block, smem, stream, ...) \
  kernel<<<(grid), (block), (smem), static_cast<cudaStream_t>(stream)>>>(__VA_ARGS__)
#endif

#include <cmath>  // INFINITY
#include <cstdint>

#include "kernel_support.h"
#include "lf/kernels/launch.h"

namespace lf::kernels {

// N elements of T moved as one access (16 bytes when N * sizeof(T) == 16).
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

template <typename T, int N>
__device__ __forceinline__ Pack<T, N> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T, N>*>(p);
}

template <typename T, int N>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, N>& v) {
  *reinterpret_cast<Pack<T, N>*>(p) = v;
}

__device__ __forceinline__ float to_float(float x) { return x; }

template <typename T>
__device__ __forceinline__ T from_float(float x);

template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}

#ifdef LF_KERNELS_EMULATE
inline float to_float(__nv_bfloat16 x) { return std::bit_cast<float>(static_cast<uint32_t>(x.bits) << 16); }
inline float to_float(__half x) { return static_cast<float>(std::bit_cast<_Float16>(x.bits)); }
template <>
inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if (std::isnan(x)) return {static_cast<uint16_t>((u >> 16) | 0x40)};
  return {static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}
template <>
inline __half from_float<__half>(float x) {
  return {std::bit_cast<uint16_t>(static_cast<_Float16>(x))};
}
#else
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}
#endif

// x rounded to T and back: where the ATen path stores an intermediate in T.
template <typename T>
__device__ __forceinline__ float round_to(float x) {
  return to_float(from_float<T>(x));
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}

// The sum (kMax false) or max of v over the block, returned to every thread. Two __syncthreads:
// callable in a loop. Each instantiation has its own shared slots.
template <bool kMax>
__device__ __forceinline__ float block_reduce(float v) {
  __shared__ float partial[32];
  __shared__ float total;
  const unsigned tid = threadIdx.x + threadIdx.y * blockDim.x;
  const unsigned lane = tid % 32, warp = tid / 32;
  const unsigned warps = (blockDim.x * blockDim.y + 31) / 32;
  v = kMax ? warp_max(v) : warp_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < warps ? partial[lane] : (kMax ? -INFINITY : 0.f);
    s = kMax ? warp_max(s) : warp_sum(s);
    if (lane == 0) total = s;
  }
  __syncthreads();
  return total;
}

__device__ __forceinline__ float block_sum(float v) { return block_reduce<false>(v); }
__device__ __forceinline__ float block_max(float v) { return block_reduce<true>(v); }

// 16 bytes: every pointer aligned to it (null pointers pass), so that packs of 16 / sizeof(T)
// elements are single accesses.
inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }
template <typename... P>
bool all_aligned16(const P*... p) {
  return (aligned16(p) && ...);
}

// Calls f.template operator()<T>() for the C++ type of `dtype`.
template <typename F>
void dispatch_dtype(DType dtype, const char* kernel, F&& f) {
  switch (dtype) {
    case DType::kFloat32: f.template operator()<float>(); return;
    case DType::kFloat16: f.template operator()<__half>(); return;
    case DType::kBFloat16: f.template operator()<__nv_bfloat16>(); return;
  }
  fail(kernel, "unknown dtype");
}

}  // namespace lf::kernels
