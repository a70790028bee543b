#pragma once
// SwiGLU's gate: out = T(silu(gate)) * up (the two roundings of the ATen path), and its
// gradient in one pass: dgate = dout * up * silu'(gate), dup = dout * silu(gate).
// Elementwise over n contiguous elements. gelu_tanh: Gemma's GeGLU, the same with gelu(gate, "tanh").
#include "lf/kernels/launch.h"

namespace lf::kernels {

struct SwigluForwardArgs {
  DType dtype = DType::kBFloat16;
  int64_t n = 0;
  const void* gate = nullptr;
  const void* up = nullptr;
  void* out = nullptr;
  bool gelu_tanh = false;  // GeGLU (Gemma): gelu(gate, tanh approximation) instead of silu(gate)
};
void swiglu_forward(const SwigluForwardArgs& a, Stream stream);

struct SwigluBackwardArgs {
  DType dtype = DType::kBFloat16;
  int64_t n = 0;
  const void* gate = nullptr;
  const void* up = nullptr;
  const void* dout = nullptr;
  void* dgate = nullptr;
  void* dup = nullptr;
  bool gelu_tanh = false;
};
void swiglu_backward(const SwigluBackwardArgs& a, Stream stream);

}  // namespace lf::kernels
