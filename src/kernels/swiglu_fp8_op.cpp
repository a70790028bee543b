// silu(gate) * up with FP8 casts made beside it, as an autograd Function whose gradients are swiglu's (it saves
// gate and up, as swiglu_op.cpp does): in the forward the rowwise cast of act (lf/kernels/swiglu_fp8.h), which
// down_proj's FP8 forward reads instead of casting act; in the backward the factored casts of dgate and dup
// (lf/kernels/swiglu_fp8_backward.h), handed to gate_proj's and up_proj's input gradients
// (quant::fp8_seed_grad_input_cast). The casts are side outputs, not differentiated.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>

#include "fused_op_impls.h"
#include "kernel_device.h"
#include "lf/common/error.h"
#include "lf/kernels/fp8_cast.h"
#include "lf/kernels/swiglu.h"
#include "lf/kernels/swiglu_fp8.h"
#include "lf/kernels/swiglu_fp8_backward.h"

namespace lf::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What the kernels take: 2-byte gate and up of one shape on the kernels' device, rows of at most
// kFp8RowMaxCols in packs of kFp8RowPack.
bool takes_rows(const at::Tensor& gate, const at::Tensor& up) {
  if (!gate.defined() || !up.defined() || gate.dim() < 1 || gate.sizes() != up.sizes()) return false;
  if (gate.scalar_type() != up.scalar_type() || gate.device() != up.device() || !on_kernel_device(gate)) return false;
  if (gate.scalar_type() != at::kBFloat16 && gate.scalar_type() != at::kHalf) return false;
  return gate.size(-1) > 0 && gate.size(-1) <= kFp8RowMaxCols && gate.size(-1) % kFp8RowPack == 0;
}

// A rowwise cast along the last axis (the rowwise recipe's input and gradient casts).
bool takes_scaling(const at::Tensor& x, const quant::Fp8Scaling& s) {
  if (!s.rowwise || (s.axis != -1 && s.axis != x.dim() - 1)) return false;
  return s.dtype == at::ScalarType::Float8_e4m3fn || s.dtype == at::ScalarType::Float8_e5m2;
}

// A stored weight's row scales [cols, 1] (or [cols]) on x's device: one factor a column of x's gradient.
bool takes_weight_scale(const at::Tensor& x, const at::Tensor& w_scale) {
  return w_scale.defined() && w_scale.scalar_type() == at::kFloat && w_scale.numel() == x.size(-1) &&
         w_scale.device() == x.device();
}

// The factors fp8_stored_grad_input's cast multiplies g's columns by, as fp8_cast_op.cpp passes them to the cast
// kernel: w.scale's inverse in g's dtype, as float32 [cols], contiguous and 32-byte aligned.
at::Tensor column_factors(const at::Tensor& w_scale, at::ScalarType dtype) {
  return cast_factors(w_scale.reciprocal(), dtype);
}

// An FP8 cast's buffers for [rows, cols]: its data in s's dtype, a float32 scale a row.
quant::Fp8Tensor empty_cast(int64_t rows, int64_t cols, const at::TensorOptions& o, const quant::Fp8Scaling& s) {
  return {at::empty({rows, cols}, o.dtype(s.dtype)), at::empty({rows, 1}, o.dtype(at::kFloat))};
}

at::Tensor forward_with_cast(const at::Tensor& g, const at::Tensor& u, const quant::Fp8Scaling& s,
                             quant::Fp8Tensor& cast) {
  auto out = at::empty_like(g);
  SwigluFp8Args a;
  a.dtype = kernel_dtype(g);
  a.e5m2 = s.dtype == at::ScalarType::Float8_e5m2;
  a.pow2 = s.pow2;
  a.cols = g.size(-1);
  a.rows = g.numel() / a.cols;
  cast = empty_cast(a.rows, a.cols, g.options(), s);
  a.gate = g.const_data_ptr();
  a.up = u.const_data_ptr();
  a.out = out.mutable_data_ptr();
  a.fp8 = static_cast<uint8_t*>(cast.data.data_ptr());
  a.scale = cast.scale.data_ptr<float>();
  run_on_device(g, [&](Stream st) { swiglu_fp8_forward(a, st); });
  return out;
}

// {dgate, dup} and their casts under s, the factors gate_w_scale's and up_w_scale's inverses.
struct GradsAndCasts {
  at::Tensor dgate, dup;
  quant::Fp8Tensor gate_cast, up_cast;
};

GradsAndCasts backward_with_casts(const at::Tensor& g, const at::Tensor& u, const at::Tensor& dout,
                                  const at::Tensor& gate_w_scale, const at::Tensor& up_w_scale,
                                  const quant::Fp8Scaling& s) {
  auto d = dout.contiguous();
  if (reinterpret_cast<uintptr_t>(d.const_data_ptr()) % 16 != 0) d = d.clone();  // the kernel loads 16-byte packs
  GradsAndCasts r{at::empty_like(g), at::empty_like(u), {}, {}};
  const auto fg = column_factors(gate_w_scale, g.scalar_type()), fu = column_factors(up_w_scale, g.scalar_type());
  SwigluFp8BackwardArgs a;
  a.dtype = kernel_dtype(g);
  a.e5m2 = s.dtype == at::ScalarType::Float8_e5m2;
  a.pow2 = s.pow2;
  a.cols = g.size(-1);
  a.rows = g.numel() / a.cols;
  r.gate_cast = empty_cast(a.rows, a.cols, g.options(), s);
  r.up_cast = empty_cast(a.rows, a.cols, g.options(), s);
  a.gate = g.const_data_ptr();
  a.up = u.const_data_ptr();
  a.dout = d.const_data_ptr();
  a.dgate = r.dgate.mutable_data_ptr();
  a.dup = r.dup.mutable_data_ptr();
  a.gate_mul = fg.const_data_ptr<float>();
  a.up_mul = fu.const_data_ptr<float>();
  a.gate_fp8 = static_cast<uint8_t*>(r.gate_cast.data.data_ptr());
  a.up_fp8 = static_cast<uint8_t*>(r.up_cast.data.data_ptr());
  a.gate_scale = r.gate_cast.scale.data_ptr<float>();
  a.up_scale = r.up_cast.scale.data_ptr<float>();
  run_on_device(d, [&](Stream st) { swiglu_fp8_backward(a, st); });
  return r;
}

// cast (forward): act's FP8 data [rows, cols] and scale [rows, 1], quant::fp8_cast's of act viewed as
// [rows, cols]; null: none. gate_w_scale / up_w_scale (backward): gate_proj's and up_proj's stored row scales,
// undefined: swiglu's backward alone. They ride by pointer (autograd's inputs must be defined tensors), kept in
// saved_data.
struct SwigluFp8Fn : public torch::autograd::Function<SwigluFp8Fn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& gate, const at::Tensor& up,
                            const quant::Fp8Scaling* s, quant::Fp8Tensor* cast, const at::Tensor* gate_w_scale,
                            const at::Tensor* up_w_scale) {
    const auto g = gate.contiguous(), u = up.contiguous();
    auto out = cast ? forward_with_cast(g, u, *s, *cast) : swiglu_forward_op(g, u, /*gelu=*/false);
    ctx->save_for_backward({g, u});
    ctx->saved_data["gate_w_scale"] = *gate_w_scale;
    ctx->saved_data["up_w_scale"] = *up_w_scale;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const auto gw = ctx->saved_data["gate_w_scale"].toTensor(), uw = ctx->saved_data["up_w_scale"].toTensor();
    if (!gw.defined()) {
      auto [dg, du] = swiglu_backward_op(saved[0], saved[1], grad[0], /*gelu=*/false);
      return {dg, du, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    }
    // The recipe's gradient cast (fp8_stored_grad_input's): e4m3, power-of-two row scales.
    const auto s = quant::fp8_grad_scaling(quant::Fp8Recipe::kRowwise, -1);
    auto r = backward_with_casts(saved[0], saved[1], grad[0], gw, uw, s);
    quant::fp8_seed_grad_input_cast(r.dgate, gw, quant::Fp8Recipe::kRowwise, r.gate_cast);
    quant::fp8_seed_grad_input_cast(r.dup, uw, quant::Fp8Recipe::kRowwise, r.up_cast);
    return {r.dgate, r.dup, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor swiglu_fp8_op(const at::Tensor& gate, const at::Tensor& up, const quant::Fp8Scaling& s,
                         quant::Fp8Tensor& cast) {
  if (!takes_rows(gate, up) || !takes_scaling(gate, s)) return at::Tensor();
  const at::Tensor none;
  return SwigluFp8Fn::apply(gate, up, &s, &cast, &none, &none);
}

at::Tensor swiglu_fp8_grads_op(const at::Tensor& gate, const at::Tensor& up, const quant::Fp8Scaling* s,
                               quant::Fp8Tensor* cast, const at::Tensor& gate_w_scale, const at::Tensor& up_w_scale) {
  if (!takes_rows(gate, up) || (cast && !takes_scaling(gate, *s))) return at::Tensor();
  if (!takes_weight_scale(gate, gate_w_scale) || !takes_weight_scale(gate, up_w_scale)) return at::Tensor();
  return SwigluFp8Fn::apply(gate, up, s, cast, &gate_w_scale, &up_w_scale);
}

}  // namespace lf::kernels
