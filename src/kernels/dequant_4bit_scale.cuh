#pragma once
// A 4-bit block's scale as bitsandbytes computes it, shared by the dequantization kernel
// (dequant_4bit.cu) and the fused few-row GEMM (dequant_gemv_4bit.cu): the block's fp32 absmax, or
// with double quantization dynamic_map[code] x nested_absmax[block / 256] + offset. Explicit
// __fmul_rn / __fadd_rn: nvcc would contract that multiply-add into an FMA, one rounding where
// bitsandbytes (and quant::dequantize_4bit) has two.
#include <cstdint>

#include "kernel_math.cuh"  // __device__ and friends, emulated on the CPU
#include "lf/kernels/dequant_4bit.h"

namespace lf::kernels {
namespace {

#ifdef LF_KERNELS_EMULATE
inline float mul_rn(float a, float b) { return a * b; }
inline float add_rn(float a, float b) { return a + b; }
#else
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
#endif

__device__ __forceinline__ float block_scale(const Dequant4Args& a, int64_t block) {
  if (!a.absmax_codes) return a.absmax[block];
  return add_rn(mul_rn(a.dynamic_map[a.absmax_codes[block]], a.nested_absmax[block / 256]), a.offset[0]);
}

}  // namespace
}  // namespace lf::kernels
