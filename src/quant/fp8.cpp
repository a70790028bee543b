// FP8 training's casts and GEMMs, torchao's float8 arithmetic op for op (lf/quant/fp8.h).
#include "lf/quant/fp8.h"

#include <ATen/ATen.h>

#include <atomic>
#include <optional>
#include <utility>

#include <fmt/ranges.h>

#include "fp8_cast_reuse.h"
#include "lf/common/error.h"

namespace lf::quant {

namespace {

// The installed device kernel of type K (one slot per kernel type; null: ATen).
template <typename K>
std::atomic<K>& kernel_slot() {
  static std::atomic<K> k{nullptr};
  return k;
}

// set_fp8_rowwise_scales_in_gemm's switch (off: torchao's two steps everywhere).
std::atomic<bool>& rowwise_scales_in_gemm() {
  static std::atomic<bool> on{false};
  return on;
}

// x^T [C, R] contiguous, for x [R, C]: the kernel where it takes x, else ATen's strided copy.
at::Tensor transposed_copy(const at::Tensor& x) {
  if (const auto k = kernel_slot<TransposeKernel>().load(std::memory_order_acquire)) {
    at::Tensor out;
    if (k(x, out)) return out;
  }
  return x.t().contiguous();
}

// A scale of one GEMM operand per row ([M, 1] for a [M, K]) or per column ([1, N] for b [K, N]).
bool rowwise_pair(const Fp8Tensor& a, const Fp8Tensor& b) {
  return a.scale.dim() == 2 && b.scale.dim() == 2 && a.scale.size(0) == a.data.size(0) && a.scale.size(1) == 1 &&
         b.scale.size(0) == 1 && b.scale.size(1) == b.data.size(1);
}

bool column_major(const at::Tensor& t) { return t.stride(0) == 1 && t.stride(1) >= t.size(0); }

// cuBLASLt's FP8 GEMM reads a row-major and b column-major (torchao's preprocess_addmm makes the same
// copies); the CPU's _scaled_mm takes any layout.
std::pair<at::Tensor, at::Tensor> cublaslt_layout(const at::Tensor& a, const at::Tensor& b) {
  if (!a.is_cuda()) return {a, b};
  // a column-major a (a transposed view) and a row-major b are each one transposed copy
  return {a.is_contiguous() ? a : transposed_copy(a.t()), column_major(b) ? b : transposed_copy(b).t()};
}

// Rowwise operands without fast accumulation, as torchao's addmm_float8_unwrapped runs them: the tensorwise
// GEMM with unit scales (torchao: CUTLASS's rowwise kernel is slow without fast accumulation), in bf16, then y
// times a's inverse row scales post_a [M, 1] and b's post_b [1, N] (undefined: b has none, its scales folded
// away). torchao multiplies by the [M, N] product post_a * post_b (Inductor fuses it); rowwise scales are powers
// of two, so y * post_a * post_b, one broadcast at a time, rounds the same without an [M, N] float32 tensor.
// Where set_fp8_rowwise_scales_in_gemm is on (sm_90 with CUDA 12.9+, where ATen's rowwise _scaled_mm is
// cuBLASLt's outer-vector scaling), _scaled_mm takes the scales itself: power-of-two scales commute with the
// output's rounding, and on the H100 (torch 2.11 cu130) it accumulated as the unit-scaled GEMM: 0 of 29M outputs
// differed at 7B's down_proj input gradient, 0.855 ms against 1.172 for the GEMM and the scale pass
// (fp8_gpu_test's FP8DGRAD line, 2026-12-06). The CPU's _scaled_mm takes per-tensor scales only.
at::Tensor rowwise_exact_accum_mm(const at::Tensor& ad, const at::Tensor& bd, const at::Tensor& post_a,
                                  const at::Tensor& post_b, at::ScalarType out_dtype) {
  const bool via_bf16 = out_dtype == at::kHalf || out_dtype == at::kFloat;
  if (ad.is_cuda() && rowwise_scales_in_gemm().load(std::memory_order_acquire)) {
    const auto pb = post_b.defined() ? post_b : at::ones({1, bd.size(1)}, post_a.options());
    auto y = at::_scaled_mm(ad, bd, post_a, pb, std::nullopt, std::nullopt, at::kBFloat16, false);
    return via_bf16 ? y.to(out_dtype) : y;
  }
  const auto one = at::ones({}, post_a.options());
  auto y = at::_scaled_mm(ad, bd, one, one, std::nullopt, std::nullopt, via_bf16 ? at::kBFloat16 : out_dtype, false);
  const auto k = kernel_slot<Fp8ScaleKernel>().load(std::memory_order_acquire);
  if (!k || !k(y, post_a, post_b)) {
    y.mul_(post_a);
    if (post_b.defined()) y.mul_(post_b);
  }
  return via_bf16 ? y.to(out_dtype) : y;
}

Fp8Tensor transposed(const Fp8Tensor& t) { return {t.data.t(), t.scale.dim() == 2 ? t.scale.t() : t.scale}; }

// Rows of zeros up to a multiple of 16: cuBLASLt's FP8 GEMM needs its reduction dimension so, and dW's is the
// token count (LLaMA-Factory's fp8 example: 40 tokens a micro-batch). Zero rows add nothing to dW and leave
// every column's amax, so the scales and the product are those of the unpadded operands.
at::Tensor pad_rows_to_16(const at::Tensor& t) {
  const int64_t pad = (16 - t.size(0) % 16) % 16;
  return pad == 0 ? t : at::constant_pad_nd(t, {0, 0, 0, pad}, 0);
}

// x [R, C] cast along its first axis (a scale per column, s.axis 0), as cuBLASLt reads such an operand: a
// row-major FP8 [C, R] copy seen transposed (column-major [R, C], scale [1, C]; transposed() of it is the
// row-major [C, R] with scale [C, 1]). Casting a bf16 transposed copy along its rows is the same numbers as
// casting x along its columns, and it is one pass of the rowwise kernel where ATen's per-column cast makes
// float32 copies and the GEMM another FP8 transpose.
Fp8Tensor fp8_cast_columns(const at::Tensor& x, Fp8Scaling s) {
  s.axis = 1;
  return transposed(fp8_cast(transposed_copy(x), s));
}

// rowwise_with_gw_hp's dx = g W: g [M, N] rowwise along N, W with one power-of-two scale (torchao's
// cast_config_weight_for_grad_input: tensorwise, e4m3). torchao hands _scaled_mm g's [M, 1] and W's [] inverse
// scales; both are powers of two, so W's folds into each of g's exactly and the product is the stored path's
// GEMM with row scales alone (exact accumulation, the scales after it, one rounding).
at::Tensor grad_input_tensorwise_weight(const at::Tensor& g2, const at::Tensor& w, Fp8Recipe r) {
  const auto ga = fp8_cast(g2, fp8_grad_scaling(r, 1));
  Fp8Scaling ws = fp8_input_scaling(r, 0);
  ws.rowwise = false;  // one scale, still a power of two (the recipe's round_scales_to_power_of_2)
  const auto wb = fp8_cast(w, ws);
  const auto [ad, bd] = cublaslt_layout(ga.data, wb.data);
  return rowwise_exact_accum_mm(ad, bd, ga.scale.reciprocal().mul(wb.scale.reciprocal()), at::Tensor(),
                                g2.scalar_type());
}

}  // namespace

double fp8_max(at::ScalarType fp8_dtype) {
  if (fp8_dtype == at::ScalarType::Float8_e4m3fn) return 448.0;
  if (fp8_dtype == at::ScalarType::Float8_e5m2) return 57344.0;
  LF_THROW(ConfigError, "an FP8 cast to {}: expected float8_e4m3fn or float8_e5m2", c10::toString(fp8_dtype));
}

void set_fp8_cast_kernel(Fp8CastKernel k) { kernel_slot<Fp8CastKernel>().store(k, std::memory_order_release); }
void set_fp8_scale_kernel(Fp8ScaleKernel k) { kernel_slot<Fp8ScaleKernel>().store(k, std::memory_order_release); }
void set_fp8_rowwise_scales_in_gemm(bool on) { rowwise_scales_in_gemm().store(on, std::memory_order_release); }
bool fp8_rowwise_scales_in_gemm() { return rowwise_scales_in_gemm().load(std::memory_order_acquire); }
void set_transpose_kernel(TransposeKernel k) { kernel_slot<TransposeKernel>().store(k, std::memory_order_release); }

at::Tensor Fp8Tensor::dequantize(at::ScalarType dtype) const { return data.to(at::kFloat).div(scale).to(dtype); }

// torchao's amax_to_scale: `finfo.max / clamp(amax.double(), min=EPS)` is Tensor.__rdiv__, which is
// reciprocal(t) * max; kept so, for the same float64 rounding, then one rounding to float32.
at::Tensor fp8_amax_to_scale(const at::Tensor& amax, at::ScalarType fp8_dtype, bool pow2) {
  auto s = amax.to(at::kDouble).clamp_min(kFp8Eps).reciprocal().mul(fp8_max(fp8_dtype)).to(at::kFloat);
  if (pow2) s = at::exp2(at::floor(at::log2(s)));  // _round_scale_down_to_power_of_2
  return s;
}

at::Tensor fp8_cast_with_scale(const at::Tensor& x, const at::Tensor& scale, at::ScalarType fp8_dtype) {
  const double m = fp8_max(fp8_dtype);
  // float32(x) * scale, clamped to the finite range (to_fp8_saturated), rounded to nearest even.
  return x.to(at::kFloat).mul(scale).clamp(-m, m).to(fp8_dtype);
}

Fp8Tensor fp8_cast(const at::Tensor& x, const Fp8Scaling& s) {
  if (const auto k = kernel_slot<Fp8CastKernel>().load(std::memory_order_acquire)) {
    Fp8Tensor out;
    if (k(x, at::Tensor(), s, out)) return out;
  }
  const auto ax = at::abs(x);
  // max |x| in x's own dtype: exact in any float dtype.
  const auto amax = s.rowwise ? at::amax(ax, {s.axis}, /*keepdim=*/true) : at::max(ax);
  const auto scale = fp8_amax_to_scale(amax, s.dtype, s.pow2);
  return {fp8_cast_with_scale(x, scale, s.dtype), scale};
}

Fp8Tensor fp8_cast_scaled_columns(const at::Tensor& x, const at::Tensor& col_mul, const Fp8Scaling& s) {
  if (const auto k = kernel_slot<Fp8CastKernel>().load(std::memory_order_acquire)) {
    Fp8Tensor out;
    if (k(x, col_mul, s, out)) return out;
  }
  return fp8_cast(x.mul(col_mul.to(x.scalar_type())), s);
}

// torchao's addmm_float8_unwrapped: the inverse scales passed to _scaled_mm; rowwise without fast
// accumulation applies them to the output after the GEMM, and rowwise outputs are bf16.
at::Tensor fp8_mm(const Fp8Tensor& a, const Fp8Tensor& b, at::ScalarType out_dtype, bool fast_accum) {
  LF_CHECK(a.data.dim() == 2 && b.data.dim() == 2 && a.data.size(1) == b.data.size(0), ConfigError,
           "an FP8 GEMM of [{}] by [{}]: expected [M, K] by [K, N]", fmt::join(a.data.sizes(), ", "),
           fmt::join(b.data.sizes(), ", "));
  const auto [ad, bd] = cublaslt_layout(a.data, b.data);
  const auto ai = a.scale.reciprocal(), bi = b.scale.reciprocal();
  const bool rowwise = rowwise_pair(a, b);
  if (rowwise && !fast_accum) return rowwise_exact_accum_mm(ad, bd, ai, bi, out_dtype);
  const bool via_bf16 = rowwise && (out_dtype == at::kHalf || out_dtype == at::kFloat);
  auto y = at::_scaled_mm(ad, bd, ai, bi, std::nullopt, std::nullopt, via_bf16 ? at::kBFloat16 : out_dtype, fast_accum);
  return via_bf16 ? y.to(out_dtype) : y;
}

Fp8Scaling fp8_input_scaling(Fp8Recipe r, int64_t axis) {
  Fp8Scaling s;
  s.dtype = at::ScalarType::Float8_e4m3fn;
  s.rowwise = fp8_rowwise(r);
  s.pow2 = s.rowwise;
  s.axis = axis;
  return s;
}

Fp8Scaling fp8_grad_scaling(Fp8Recipe r, int64_t axis) {
  Fp8Scaling s = fp8_input_scaling(r, axis);
  if (r == Fp8Recipe::kTensorwise) s.dtype = at::ScalarType::Float8_e5m2;
  return s;
}

// x [.., K] as [M, K]; W [N, K] cast along K (torchao casts W^T [K, N] along dim 0: the same numbers).
at::Tensor fp8_linear_forward(const at::Tensor& x, const at::Tensor& w, Fp8Recipe r) {
  return fp8_stored_forward(x, fp8_store_weight(w, r), r);
}

// dx = g W: g [M, N] along N, W [N, K] along N (a scale per column k: torchao's W^T along dim -1).
at::Tensor fp8_linear_grad_input(const at::Tensor& g, const at::Tensor& w, Fp8Recipe r) {
  const auto g2 = g.reshape({-1, g.size(-1)});
  auto sizes = g.sizes().vec();
  sizes.back() = w.size(1);
  if (r == Fp8Recipe::kRowwiseGwHp) return at::_unsafe_view(grad_input_tensorwise_weight(g2, w, r), sizes);
  const auto ga = fp8_cast(g2, fp8_grad_scaling(r, 1));
  const auto wb = fp8_cast_columns(w, fp8_input_scaling(r, 0));  // [N, K] column-major, scale [1, K]
  return at::_unsafe_view(fp8_mm(ga, wb, g.scalar_type(), /*fast_accum=*/false), sizes);
}

// dW = g^T x [N, K]: both along the tokens M (g's columns and x's columns each get their scale).
// rowwise_with_gw_hp: the high-precision GEMM of the unscaled operands (torchao's ScalingType.DISABLED: mm).
at::Tensor fp8_linear_grad_weight(const at::Tensor& g, const at::Tensor& x, Fp8Recipe r, at::ScalarType dw_dtype) {
  if (!fp8_weight_grad_in_fp8(r)) {
    auto dw = at::mm(g.reshape({-1, g.size(-1)}).t(), x.reshape({-1, x.size(-1)}));
    return dw.scalar_type() == dw_dtype ? dw : dw.to(dw_dtype);
  }
  const auto g2 = pad_rows_to_16(g.reshape({-1, g.size(-1)}));
  const auto x2 = pad_rows_to_16(x.reshape({-1, x.size(-1)}));
  const auto gt = transposed(fp8_cast_columns(g2, fp8_grad_scaling(r, 0)));  // [N, M] row-major, scale [N, 1]
  // [M, K] column-major, scale [1, K]; q/k/v's (gate/up's) dW cast their shared x once (fp8_cast_reuse.h)
  const auto xs = fp8_input_scaling(r, 0);
  const auto xb =
      fp8_reused_cast(x2, xs, /*columns=*/true, [&](const at::Tensor& t) { return fp8_cast_columns(t, xs); });
  auto dw = fp8_mm(gt, xb, g.scalar_type(), /*fast_accum=*/false);
  return dw.scalar_type() == dw_dtype ? dw : dw.to(dw_dtype);
}

Fp8Tensor fp8_store_weight(const at::Tensor& w, Fp8Recipe r) { return fp8_cast(w, fp8_input_scaling(r, 1)); }

at::Tensor fp8_stored_forward(const at::Tensor& x, const Fp8Tensor& w, Fp8Recipe r) {
  const auto x2 = x.reshape({-1, x.size(-1)});
  const auto xs = fp8_input_scaling(r, 1);  // q/k/v (gate/up) cast their shared x once (fp8_cast_reuse.h)
  const auto xa =
      fp8_reused_cast(x2, xs, /*columns=*/false, [&](const at::Tensor& t) { return fp8_cast(t, xs); });
  auto sizes = x.sizes().vec();
  sizes.back() = w.data.size(0);
  return at::_unsafe_view(fp8_mm(xa, transposed(w), x.scalar_type(), /*fast_accum=*/true), sizes);
}

void fp8_seed_forward_cast(const at::Tensor& x, Fp8Recipe r, const Fp8Tensor& cast) {
  const auto x2 = x.reshape({-1, x.size(-1)});  // the view fp8_stored_forward keys its cast by
  LF_CHECK(r != Fp8Recipe::kNone && cast.data.sizes() == x2.sizes(), ConfigError,
           "fp8_seed_forward_cast: expected a recipe and a cast of x's [{}], got {} and [{}]",
           fmt::join(x2.sizes(), ", "), fp8_recipe_name(r), fmt::join(cast.data.sizes(), ", "));
  fp8_seed_cast(x2, fp8_input_scaling(r, 1), /*columns=*/false, cast);
}

void fp8_seed_grad_input_cast(const at::Tensor& g, const at::Tensor& w_scale, Fp8Recipe r, const Fp8Tensor& cast) {
  const auto g2 = g.reshape({-1, g.size(-1)});  // the view fp8_stored_grad_input keys its cast by
  LF_CHECK(fp8_rowwise(r) && cast.data.sizes() == g2.sizes() && w_scale.numel() == g2.size(1), ConfigError,
           "fp8_seed_grad_input_cast: expected rowwise, a cast of g's [{}] and a scale a column, got {}, [{}] and {}",
           fmt::join(g2.sizes(), ", "), fp8_recipe_name(r), fmt::join(cast.data.sizes(), ", "), w_scale.numel());
  fp8_seed_cast(g2, fp8_grad_scaling(r, 1), /*columns=*/false, cast, w_scale);
}

// W = diag(1/s) W_q with s [N, 1] powers of two: g W = (g diag(1/s)) W_q, the fold exact in g's own dtype (a power
// of two moves only the exponent; bf16 has float32's range), so no float32 copy of g. g's producer may have made
// this cast in its own pass (fp8_seed_grad_input_cast: the fused SwiGLU backward), keyed by g and w.scale.
Fp8Tensor fp8_stored_grad_cast(const at::Tensor& g, const Fp8Tensor& w, Fp8Recipe r) {
  LF_CHECK(fp8_rowwise(r), ConfigError, "fp8_stored_grad_cast: rowwise only, got {}", fp8_recipe_name(r));
  const auto g2 = g.reshape({-1, g.size(-1)});
  const auto gs = fp8_grad_scaling(r, 1);
  if (auto seeded = fp8_take_seeded_cast(g2, gs, w.scale)) return std::move(*seeded);
  return fp8_cast_scaled_columns(g2, w.scale.reciprocal().t().to(g2.scalar_type()), gs);
}

at::Tensor fp8_stored_grad_input(const at::Tensor& g, const Fp8Tensor& w, Fp8Recipe r) {
  const auto g2 = g.reshape({-1, g.size(-1)});
  auto sizes = g.sizes().vec();
  sizes.back() = w.data.size(1);
  if (r == Fp8Recipe::kTensorwise)
    return at::_unsafe_view(fp8_mm(fp8_cast(g2, fp8_grad_scaling(r, 1)), w, g.scalar_type(), false), sizes);
  const auto ga = fp8_stored_grad_cast(g2, w, r);
  // b = W_q with its scales folded into g: only g's row scales remain to apply.
  const auto [ad, bd] = cublaslt_layout(ga.data, w.data);
  return at::_unsafe_view(rowwise_exact_accum_mm(ad, bd, ga.scale.reciprocal(), at::Tensor(), g.scalar_type()), sizes);
}

}  // namespace lf::quant
