#pragma once
// RMSNorm, optionally fused with the residual add before it, as the decoder layer uses it:
//   h = x + delta;  y = weight * T(T(h) * rstd),  rstd = 1 / sqrt(mean(T(h)^2) + eps)
// (or Gemma's y = T(T(h) * rstd * (1 + weight)), one_plus)
// with fp32 math inside and every rounding to T where the ATen path rounds (so the result is
// that of model::RmsNorm up to fp32 summation order). Rows are contiguous, `cols` long.
#include "lf/kernels/launch.h"

namespace lf::kernels {

// The widest row the kernels take: the backward keeps one fp32 row of dweight in dynamic shared
// memory, which must stay under the 48 KB a launch gets without opting in (with the static
// shared memory of the block sum). Qwen2.5-72B / Llama-3-70B's 8192 fit; wider rows take ATen.
constexpr int64_t kRmsNormMaxCols = 10240;

struct RmsNormForwardArgs {
  DType dtype = DType::kBFloat16;  // of x, delta, weight, h, y
  int64_t rows = 0, cols = 0;
  float eps = 1e-6f;
  const void* x = nullptr;       // [rows, cols]
  const void* delta = nullptr;   // [rows, cols], or null: no add, h is x
  const void* weight = nullptr;  // [cols]
  void* h = nullptr;             // [rows, cols] x + delta (only with delta)
  void* y = nullptr;             // [rows, cols]
  float* rstd = nullptr;         // [rows], for the backward
  // Gemma's norm (model::RmsNorm::one_plus_): y = T(n * (1 + w)), n = T(h) * rstd, with `weight` float32 and
  // everything fp32 inside, rounded once (transformers' Gemma3RMSNorm); false: y = w * T(n) as above.
  bool one_plus = false;
  // Rows of at most 32 16-byte packs (256 bf16) run several a block, a lane group a row, bit-equal;
  // false: a block a row (the tests' reference).
  bool narrow_rows = true;
};
void rms_norm_forward(const RmsNormForwardArgs& a, Stream stream);

struct RmsNormBackwardArgs {
  DType dtype = DType::kBFloat16;
  int64_t rows = 0, cols = 0;
  const void* dy = nullptr;      // [rows, cols] gradient of y
  const void* h = nullptr;       // [rows, cols] the norm's input
  const void* weight = nullptr;  // [cols]
  const float* rstd = nullptr;   // [rows] from the forward
  const void* dh = nullptr;      // [rows, cols] gradient reaching h by the residual stream, or null
  void* dx = nullptr;            // [rows, cols] dh + the norm's input gradient
  void* dweight = nullptr;       // [cols] (sum over rows, fp32 inside), or null: frozen weight
  bool one_plus = false;         // Gemma's norm: weight and dweight float32, dn = dy * (1 + w) unrounded
  float* workspace = nullptr;    // rms_norm_backward_workspace(rows, cols) floats when dweight is set
  bool narrow_rows = true;       // as RmsNormForwardArgs (dx alone: with dweight a block a row)
};
// Floats of scratch the backward needs for dweight (per-block partial sums), on the current device.
int64_t rms_norm_backward_workspace(int64_t rows, int64_t cols);
void rms_norm_backward(const RmsNormBackwardArgs& a, Stream stream);

}  // namespace lf::kernels
