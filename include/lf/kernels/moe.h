#pragma once
// A mixture-of-experts layer's token movement and its experts' SwiGLU, fused (model/moe_experts.cpp
// runs the ATen ops otherwise, and rounds where these do). S = N·k slots sorted by expert;
// slot_of[n·k + j] is the slot of token n's j-th choice. T is the activations' dtype.
//   combine:           out[n] = T(Σ_j T(w[n, j] · y[slot_of[n·k + j]]))  (fp32 sum; w null: 1)
//   combine_backward:  dy[slot_of[n·k + j]] = T(g[n] · w[n, j]);  dw[n, j] = Σ_c y[slot][c] · g[n][c] (fp32)
//   swiglu_halves:     a[s, i] = T(silu(h[s, i])) · h[s, I + i]   for h [S, 2I] = [gate | up]
//   swiglu_halves_backward: dh = [T(T(da · up) · silu'(gate)) | T(da · T(silu(gate)))]
// combine reads each y row once and writes each output row once (the ATen path: a gather, a product
// and a sum, three [S, C] passes); one block per token.
#include "lf/kernels/launch.h"

namespace lf::kernels {

struct MoeCombineArgs {
  DType dtype = DType::kBFloat16;
  int64_t tokens = 0, top_k = 0, cols = 0;
  const void* y = nullptr;            // [S, cols]
  const int64_t* slot_of = nullptr;   // [tokens · top_k]
  const void* weights = nullptr;      // [tokens, top_k] in dtype, or null (each 1)
  void* out = nullptr;                // [tokens, cols]
};
void moe_combine(const MoeCombineArgs& a, Stream stream);

struct MoeCombineBackwardArgs {
  DType dtype = DType::kBFloat16;
  int64_t tokens = 0, top_k = 0, cols = 0;
  const void* g = nullptr;            // [tokens, cols]: the output's gradient
  const void* y = nullptr;            // [S, cols]
  const int64_t* slot_of = nullptr;   // [tokens · top_k]
  const void* weights = nullptr;      // [tokens, top_k] in dtype
  void* dy = nullptr;                 // [S, cols]
  float* dweights = nullptr;          // [tokens, top_k], or null (not needed)
};
void moe_combine_backward(const MoeCombineBackwardArgs& a, Stream stream);

struct MoeSwigluArgs {
  DType dtype = DType::kBFloat16;
  int64_t rows = 0, inter = 0;        // h [rows, 2·inter]
  const void* h = nullptr;
  void* out = nullptr;                // [rows, inter]
  bool vectorized = true;             // 16-byte packs where inter and the pointers allow (false: one element
                                      // a thread, the tests' bit-equal reference)
};
void moe_swiglu_halves(const MoeSwigluArgs& a, Stream stream);

struct MoeSwigluBackwardArgs {
  DType dtype = DType::kBFloat16;
  int64_t rows = 0, inter = 0;
  const void* h = nullptr;            // [rows, 2·inter]
  const void* dout = nullptr;         // [rows, inter]
  void* dh = nullptr;                 // [rows, 2·inter]
  bool vectorized = true;             // as MoeSwigluArgs
};
void moe_swiglu_halves_backward(const MoeSwigluBackwardArgs& a, Stream stream);

}  // namespace lf::kernels
