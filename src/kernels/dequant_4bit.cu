// bitsandbytes' 4-bit dequantization on the GPU; see lf/kernels/dequant_4bit.h (the blocks'
// scales: dequant_4bit_scale.cuh).
#include <algorithm>

#include "dequant_4bit_scale.cuh"
#include "kernel_math.cuh"
#include "lf/kernels/dequant_4bit.h"

namespace lf::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 16;

template <typename T>
__global__ void __launch_bounds__(kThreads) dequant_4bit_kernel(const Dequant4Args a) {
  const int64_t bytes = (a.n + 1) / 2;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < bytes; i += int64_t{gridDim.x} * blockDim.x) {
    const uint8_t v = a.data[i];
    T* out = static_cast<T*>(a.out);
    const int64_t e = 2 * i;
    const float s0 = block_scale(a, e / a.blocksize);
    out[e] = from_float<T>(mul_rn(a.code[v >> 4], s0));
    if (e + 1 < a.n) {
      const float s1 = (e + 1) % a.blocksize == 0 ? block_scale(a, (e + 1) / a.blocksize) : s0;
      out[e + 1] = from_float<T>(mul_rn(a.code[v & 15], s1));
    }
  }
}

// The fast path: a thread per 8 packed bytes (16 weights of one block: blocksize % 16 == 0), one
// 8-byte load, one scale, 16 outputs stored as packs of 16 bytes.
template <typename T>
__global__ void __launch_bounds__(kThreads) dequant_4bit_x16_kernel(const Dequant4Args a) {
  constexpr int kOut = 16 / sizeof(T);  // outputs per 16-byte pack
  const int64_t chunks = a.n / 16;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < chunks; i += int64_t{gridDim.x} * blockDim.x) {
    const auto bytes = load_pack<uint8_t, 8>(a.data + i * 8);
    const float s = block_scale(a, i * 16 / a.blocksize);
    T* out = static_cast<T*>(a.out) + i * 16;
#pragma unroll
    for (int p = 0; p < 16 / kOut; ++p) {
      Pack<T, kOut> o;
#pragma unroll
      for (int j = 0; j < kOut; ++j) {
        const int e = p * kOut + j;
        const uint8_t v = bytes.v[e / 2];
        o.v[j] = from_float<T>(mul_rn(a.code[e % 2 ? v & 15 : v >> 4], s));
      }
      store_pack<T, kOut>(out + p * kOut, o);
    }
  }
}

int64_t blocks_for(int64_t items) {
  return std::max<int64_t>(1, std::min<int64_t>((items + kThreads - 1) / kThreads,
                                                int64_t{multiprocessor_count()} * kBlocksPerSm));
}

}  // namespace

void dequant_4bit(const Dequant4Args& a, Stream stream) {
  if (a.n < 0 || a.blocksize <= 0 || a.blocksize % 2) fail("dequant_4bit", "n < 0 or an odd blocksize");
  if (a.n == 0) return;
  if (!a.data || !a.code || !a.out || (!a.absmax && !(a.absmax_codes && a.dynamic_map && a.nested_absmax && a.offset)))
    fail("dequant_4bit", "null pointer");
  auto* s = static_cast<cudaStream_t>(stream);
  dispatch_dtype(a.dtype, "dequant_4bit", [&]<typename T>() {
    if (a.n % 16 == 0 && a.blocksize % 16 == 0 && all_aligned16(a.out) && reinterpret_cast<uintptr_t>(a.data) % 8 == 0) {
      auto* k = &dequant_4bit_x16_kernel<T>;
      LF_LAUNCH(k, dim3(static_cast<unsigned>(blocks_for(a.n / 16))), dim3(kThreads), 0, s, a);
    } else {
      auto* k = &dequant_4bit_kernel<T>;
      LF_LAUNCH(k, dim3(static_cast<unsigned>(blocks_for((a.n + 1) / 2))), dim3(kThreads), 0, s, a);
    }
  });
  check_launch("dequant_4bit");
}

}  // namespace lf::kernels
