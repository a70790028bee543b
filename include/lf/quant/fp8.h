#pragma once
// FP8 training's numbers, as torchao's float8 training computes them (torchao/float8: float8_utils.py,
// float8_scaling_utils.py, float8_linear.py, float8_ops.py; Float8LinearConfig's recipes), so that a
// cast here is torchao's bit for bit (tests/quant against torchao in the reference venv):
//
//   amax  = max |x| over the tensor (tensorwise) or along one axis (rowwise), in x's dtype
//   scale = float32( float64(fmax) / max(float64(amax), 1e-12) )       fmax: e4m3 448, e5m2 57344
//           rowwise: rounded down to a power of two, exp2(floor(log2(scale)))
//   data  = float8( clamp(float32(x) * scale, -fmax, fmax) )            round to nearest even, saturated
//   x·w   = _scaled_mm(a.data, b.data, 1/a.scale, 1/b.scale) in the output dtype
//
// The recipes (torchao's Float8LinearRecipeName), for y = x W^T, dx = g W, dW = g^T x:
//   tensorwise: one scale per tensor; x and W in e4m3, the output gradient g in e5m2 (its range);
//               the forward GEMM with fast accumulation, the two backward GEMMs without.
//   rowwise:    a scale per row of each GEMM operand along its reduction dimension, every operand in
//               e4m3, scales powers of two; torchao's more accurate recipe (outlier channels stay in
//               their own rows' scales).
//   rowwise_with_gw_hp: rowwise's forward; the input gradient from g rowwise and W with one scale (both
//               e4m3, powers of two); the weight gradient g^T x in high precision (a bf16 GEMM of the
//               unscaled operands): no casts along the tokens, and dW without FP8's rounding.
// The GEMM is ATen's _scaled_mm: cuBLASLt's FP8 GEMM on sm_89 / sm_90, and on the CPU torch's own
// implementation of the same operator (the emulation CI runs: the same casts, the same call).
// Threading: pure functions (the current stream of the tensors' device).
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "lf/quant/fp8_recipe.h"

namespace lf::quant {

// torchao's EPS: the smallest amax a scale is computed from (an all-zero tensor gets fmax / 1e-12).
inline constexpr double kFp8Eps = 1e-12;
// The largest finite value of e4m3fn (448) or e5m2 (57344).
double fp8_max(at::ScalarType fp8_dtype);

// A tensor in FP8 and the scale it was multiplied by: data [.., K] in an FP8 dtype, scale fp32 of
// shape [] (tensorwise) or the data's shape with the scaled axis of size 1 (rowwise: [M, 1] or [1, N]).
struct Fp8Tensor {
  at::Tensor data;
  at::Tensor scale;
  at::Tensor dequantize(at::ScalarType dtype) const;  // data / scale in `dtype` (tests, merging)
};

// How one GEMM operand is scaled: one scale, or one per slice along `axis` (the amax is taken over
// `axis`: for x [M, K] with axis 1 a scale per row m).
struct Fp8Scaling {
  at::ScalarType dtype = at::ScalarType::Float8_e4m3fn;
  int64_t axis = -1;       // the reduced axis (rowwise); ignored when tensorwise
  bool rowwise = false;
  bool pow2 = false;       // scales rounded down to powers of two (torchao's rowwise recipe)
};

// amax -> scale, torchao's amax_to_scale (+ its power-of-two rounding).
at::Tensor fp8_amax_to_scale(const at::Tensor& amax, at::ScalarType fp8_dtype, bool pow2);
// torchao's hp_tensor_to_float8_dynamic on x (any float dtype, 2-D for rowwise). On a CUDA build
// with the fused kernel, a bf16 / fp32 input is read once (kernels/fp8_cast.cu), bit-equal.
Fp8Tensor fp8_cast(const at::Tensor& x, const Fp8Scaling& s);
// Only the cast with a given scale (scale: [] or broadcastable to x), torchao's _ToFloat8ConstrFunc.
at::Tensor fp8_cast_with_scale(const at::Tensor& x, const at::Tensor& scale, at::ScalarType fp8_dtype);

// a.data [M, K] @ b.data [K, N] -> [M, N] in out_dtype, each operand's scale undone: torchao's
// addmm_float8_unwrapped (rowwise without fast accumulation: the scales applied after a unit-scaled GEMM, as it
// does, or by the GEMM where set_fp8_rowwise_scales_in_gemm says it writes the same bits). On CUDA b must be
// column-major (b.data = W.t() of a row-major W); the CPU takes any layout.
at::Tensor fp8_mm(const Fp8Tensor& a, const Fp8Tensor& b, at::ScalarType out_dtype, bool fast_accum);

// The three GEMMs of one linear layer under a recipe (torchao's matmul_with_hp_or_float8_args):
// x [M, K], w [N, K], g [M, N] in high precision; results in x's / g's dtype (dW in `dw_dtype`).
Fp8Scaling fp8_input_scaling(Fp8Recipe r, int64_t axis);   // x (and W): e4m3
Fp8Scaling fp8_grad_scaling(Fp8Recipe r, int64_t axis);    // g: e5m2 tensorwise, e4m3 rowwise
at::Tensor fp8_linear_forward(const at::Tensor& x, const at::Tensor& w, Fp8Recipe r);         // x W^T
at::Tensor fp8_linear_grad_input(const at::Tensor& g, const at::Tensor& w, Fp8Recipe r);      // g W
at::Tensor fp8_linear_grad_weight(const at::Tensor& g, const at::Tensor& x, Fp8Recipe r,
                                  at::ScalarType dw_dtype);                                    // g^T x

// A frozen weight stored once (LoRA's base): W [N, K] cast as the recipe's forward needs it (one scale,
// or one per output row n), kept as is; the forward and the input gradient read it each step. Under
// rowwise_with_gw_hp too: a frozen weight has no weight gradient, and its input gradient reads the one rowwise
// copy kept (torchao casts the bf16 weight with one scale there, a copy lf-train no longer holds).
Fp8Tensor fp8_store_weight(const at::Tensor& w, Fp8Recipe r);
at::Tensor fp8_stored_forward(const at::Tensor& x, const Fp8Tensor& w, Fp8Recipe r);       // x W^T [M, N]
// Hands the FP8 forwards (fp8_stored_forward, fp8_linear_forward) the cast of their input x [.., K] under r,
// made by x's producer in the pass that wrote x (the fused SwiGLU: down_proj's input), so that the next such
// forward of x, unwritten since, reads it instead of casting x again. cast: what fp8_cast(x.reshape({-1, K}),
// fp8_input_scaling(r, 1)) returns, bit for bit (data [M, K], scale [M, 1] rowwise); the caller vouches for it.
// Per thread, as the reuse of q/k/v's shared cast (src/quant/fp8_cast_reuse.h).
void fp8_seed_forward_cast(const at::Tensor& x, Fp8Recipe r, const Fp8Tensor& cast);
// Hands fp8_stored_grad_input(g, w, r) the cast of g it would make (rowwise only): fp8_cast_scaled_columns of
// g.reshape({-1, N}) by w.scale's inverse (w_scale: w.scale [N, 1], the stored weight's own tensor) under
// fp8_grad_scaling(r, 1), bit for bit, made by g's producer in the pass that wrote g (the fused SwiGLU backward:
// gate's and up's input gradients). Keyed by g's view and version and w_scale's: the next fp8_stored_grad_input
// of that g and weight reads it, once; the caller vouches for it. Per thread (autograd's).
void fp8_seed_grad_input_cast(const at::Tensor& g, const at::Tensor& w_scale, Fp8Recipe r, const Fp8Tensor& cast);
// fp8_stored_grad_input's (rowwise) cast of g [.., N]: the one seeded for g and w.scale, taken (read once), else
// fp8_cast_scaled_columns(g.reshape({-1, N}), w.scale's inverse in g's dtype, fp8_grad_scaling(r, 1)).
Fp8Tensor fp8_stored_grad_cast(const at::Tensor& g, const Fp8Tensor& w, Fp8Recipe r);
// g W [M, K] from the stored W: tensorwise reuses W's cast; rowwise folds W's row scales (along the
// GEMM's reduction dimension N here) into g before g's own row-wise cast: g W = (g diag(1/s_w)) W_q.
at::Tensor fp8_stored_grad_input(const at::Tensor& g, const Fp8Tensor& w, Fp8Recipe r);

// The cast of x [M, C] with each column first multiplied by its factor (col_mul [1, C] in x's dtype, the
// product rounded to x's dtype, as x.mul(col_mul)): the rowwise input gradient of a stored weight, its row
// scales folded into g. With the kernel, one pass over x instead of the multiply's extra one.
Fp8Tensor fp8_cast_scaled_columns(const at::Tensor& x, const at::Tensor& col_mul, const Fp8Scaling& s);

// A device kernel for fp8_cast and fp8_cast_scaled_columns (kernels/fp8_cast.cu: reads x once, writes the
// FP8 data and the scale, amax and scale on the device, no host sync), installed by the worker on a CUDA
// build; col_mul undefined for a plain cast. It returns false for an input it does not take (then ATen
// computes the cast). Null: ATen always.
using Fp8CastKernel = bool (*)(const at::Tensor& x, const at::Tensor& col_mul, const Fp8Scaling& s, Fp8Tensor& out);
void set_fp8_cast_kernel(Fp8CastKernel k);

// A device kernel for the row (and column) scaling after the rowwise GEMMs without fast accumulation
// (kernels/fp8_output_scale.cu: y = T(T(y * row_scale) * col_scale) in place, ATen's two multiplies in one
// pass), installed beside the cast kernel; col_scale undefined: rows only. False: it does not take y (ATen
// multiplies). Null: ATen always.
using Fp8ScaleKernel = bool (*)(at::Tensor& y, const at::Tensor& row_scale, const at::Tensor& col_scale);
void set_fp8_scale_kernel(Fp8ScaleKernel k);

// Whether the rowwise GEMMs without fast accumulation hand _scaled_mm their scales (one GEMM) instead of
// torchao's unit-scaled GEMM and output multiply (two passes). Only where the two were measured bit-equal: sm_90
// with CUDA 12.9+, where ATen's rowwise _scaled_mm is cuBLASLt's outer-vector scaling (train/fp8_device.cpp
// decides; elsewhere it is CUTLASS's kernel, another accumulation). Off by default and on the CPU.
void set_fp8_rowwise_scales_in_gemm(bool on);
bool fp8_rowwise_scales_in_gemm();

// A device kernel for the transposed copies cuBLASLt's FP8 layouts need (kernels/transpose.cu: a stored weight
// seen along N for its input gradient, x and g along the tokens for dW): out = x^T, contiguous, for a contiguous
// 2-D x; the same bits as x.t().contiguous(). False: it does not take x (ATen copies). Null: ATen always.
using TransposeKernel = bool (*)(const at::Tensor& x, at::Tensor& out);
void set_transpose_kernel(TransposeKernel k);

}  // namespace lf::quant
