#pragma once
// The gate's activation of SwiGLU (and Gemma's GeGLU), its derivative in fp32 and the backward's rounding, shared by
// swiglu.cu, swiglu_fp8.cu and swiglu_fp8_backward.cu so that they write the same bits: one definition, one rounding
// order.
#include "kernel_math.cuh"

namespace lf::kernels {

__device__ __forceinline__ float sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

// The gate's activation and its derivative, in fp32: silu (ATen's x / (1 + e^-x)), or Gemma's GELU with the tanh
// approximation (kGelu: ATen's GeluCUDAKernelImpl / GeluBackwardCUDAKernelImpl formulas, op for op).
constexpr float kGeluBeta = 0.7978845608028654f;  // sqrt(2 / pi): ATen's M_SQRT2 * M_2_SQRTPI * 0.5
constexpr float kGeluKappa = 0.044715f;

template <bool kGelu>
__device__ __forceinline__ float gate_act(float x) {
  if constexpr (kGelu) return 0.5f * x * (1.f + tanhf(kGeluBeta * (x + kGeluKappa * (x * x * x))));
  else return x / (1.f + expf(-x));
}

template <bool kGelu>
__device__ __forceinline__ float gate_act_grad(float x) {
  if constexpr (kGelu) {
    const float x_sq = x * x;
    const float tanh_inner = tanhf(kGeluBeta * (x + kGeluKappa * x_sq * x));
    const float right = 1.f + tanh_inner, left = 0.5f * x;
    const float inner_derivative = kGeluBeta * (1.f + 3.f * kGeluKappa * x_sq);
    return 0.5f * right + left * (1.f - tanh_inner * tanh_inner) * inner_derivative;
  } else {
    const float sg = sigmoid(x);
    return sg * (1.f + x * (1.f - sg));
  }
}

// The backward at one element from dout d, rounded as the ATen path: dup = T(d * T(act(g))), dgate =
// T(T(d * up) * act'(g)).
template <typename T, bool kGelu>
__device__ __forceinline__ void gated_grads(T g, T up, T dout, T& dgate, T& dup) {
  const float x = to_float(g), d = to_float(dout);
  dup = from_float<T>(d * round_to<T>(gate_act<kGelu>(x)));
  dgate = from_float<T>(round_to<T>(d * to_float(up)) * gate_act_grad<kGelu>(x));
}

}  // namespace lf::kernels
