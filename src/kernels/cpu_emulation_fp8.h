#pragma once
// The CUDA intrinsics fp8_cast.cu uses, for its CPU emulation (cpu_emulation.h; kernels_emu_test): the
// double-precision reciprocal and product, float/int bit casts, atomicMax on int bits, cudaMemsetAsync, and
// cuda_fp8.h's saturating float -> e4m3 / e5m2 conversion, which rounds to nearest even as c10's Float8 types
// do (the kernel clamps to the finite range first, so c10's overflow rule never applies).
#include <c10/util/Float8_e4m3fn.h>
#include <c10/util/Float8_e5m2.h>

#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>

using __nv_fp8_storage_t = uint8_t;
enum __nv_saturation_t { __NV_NOSAT, __NV_SATFINITE };
enum __nv_fp8_interpretation_t { __NV_E4M3, __NV_E5M2 };
enum cudaError_t { cudaSuccess };

inline double __drcp_rn(double x) { return 1.0 / x; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float __double2float_rn(double x) { return static_cast<float>(x); }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
inline int __float_as_int(float x) { return std::bit_cast<int>(x); }

inline __nv_fp8_storage_t __nv_cvt_float_to_fp8(float x, __nv_saturation_t, __nv_fp8_interpretation_t kind) {
  return kind == __NV_E5M2 ? c10::Float8_e5m2(x).x : c10::Float8_e4m3fn(x).x;
}

inline int atomicMax(int* p, int v) {
  std::atomic_ref<int> a(*p);
  int old = a.load();
  while (old < v && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}

inline cudaError_t cudaMemsetAsync(void* p, int v, size_t n, void*) {
  std::memset(p, v, n);
  return cudaSuccess;
}
