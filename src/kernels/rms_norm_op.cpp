// RMSNorm (Gemma's (1 + w) too) and add + RMSNorm as autograd Functions over the rms_norm.h launchers. The forward
// saves the norm's input (bf16), the weight and rstd ([rows] fp32) — not the fp32 copies the
// ATen graph keeps; the backward gives dx and, unless the weight is frozen, dweight (summed
// over rows in fp32, returned in the weight's dtype, into the cast's autograd edge).
#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <string>

#include "fused_op_impls.h"
#include "kernel_device.h"
#include "lf/common/error.h"
#include "lf/kernels/rms_norm.h"

namespace lf::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// `heads`: the weight spans one D-wide group of x's last dim (head_rms_norm), not all of it; `one_plus`:
// Gemma's norm, whose weight is float32 whatever x's dtype.
void check_inputs(const at::Tensor& x, const at::Tensor& w, const at::Tensor* delta, bool heads = false,
                  bool one_plus = false) {
  LF_CHECK(on_kernel_device(x) && is_kernel_dtype(x) && x.dim() >= 1 && x.size(-1) <= kRmsNormMaxCols, BackendError,
           "fused rms_norm: expected x [.., C <= {}] in float32/float16/bfloat16 on the kernels' device, got {}",
           kRmsNormMaxCols, describe(x));
  const bool fits = w.dim() == 1 && w.size(0) > 0 && (heads ? x.size(-1) % w.size(0) == 0 : w.size(0) == x.size(-1));
  const auto w_dtype = one_plus ? at::kFloat : x.scalar_type();
  LF_CHECK(fits && w.scalar_type() == w_dtype && w.device() == x.device(), BackendError,
           "fused {}{}: expected the weight [{}] in {} on x's device, got {} for x {}",
           heads ? "head_rms_norm" : "rms_norm", one_plus ? " (1 + w)" : "",
           heads ? "D dividing C" : std::to_string(x.size(-1)), one_plus ? "float32" : "x's dtype", describe(w),
           describe(x));
  if (delta)
    LF_CHECK(delta->sizes() == x.sizes() && delta->scalar_type() == x.scalar_type() && delta->device() == x.device(),
             BackendError, "fused add_rms_norm: expected delta like x {}, got {}", describe(x), describe(*delta));
}

struct Forward {
  at::Tensor h, y, rstd;  // h: the norm's input (x itself without delta)
};

Forward norm_forward(const at::Tensor& x, const at::Tensor* delta, const at::Tensor& w, double eps, bool one_plus) {
  Forward f;
  const auto xc = x.contiguous();
  const auto wc = w.contiguous();
  const auto dc = delta ? delta->contiguous() : at::Tensor();
  const int64_t cols = wc.size(0), rows = cols ? xc.numel() / cols : 0;  // rows of the weight's width
  f.h = delta ? at::empty_like(xc) : xc;
  f.y = at::empty_like(xc);
  f.rstd = at::empty({rows}, xc.options().dtype(at::kFloat));
  RmsNormForwardArgs a;
  a.dtype = kernel_dtype(xc);
  a.rows = rows;
  a.cols = cols;
  a.eps = static_cast<float>(eps);
  a.x = xc.const_data_ptr();
  a.delta = delta ? dc.const_data_ptr() : nullptr;
  a.weight = wc.const_data_ptr();
  a.h = delta ? f.h.mutable_data_ptr() : nullptr;
  a.y = f.y.mutable_data_ptr();
  a.rstd = f.rstd.mutable_data_ptr<float>();
  a.one_plus = one_plus;
  run_on_device(xc, [&](Stream s) { rms_norm_forward(a, s); });
  return f;
}

// {dx, dweight (undefined unless need_dw)}; dres: the gradient h gets from the residual stream.
std::pair<at::Tensor, at::Tensor> norm_backward(const at::Tensor& dy, const at::Tensor& dres, const at::Tensor& h,
                                                const at::Tensor& w, const at::Tensor& rstd, bool need_dw,
                                                bool one_plus) {
  const auto g = dy.contiguous();
  const auto r = dres.defined() ? dres.contiguous() : at::Tensor();
  const int64_t cols = w.size(0), rows = h.numel() / cols;
  auto dx = at::empty_like(h);
  at::Tensor dw;
  run_on_device(h, [&](Stream s) {
    at::Tensor ws;
    RmsNormBackwardArgs a;
    a.dtype = kernel_dtype(h);
    a.rows = rows;
    a.cols = cols;
    a.dy = g.const_data_ptr();
    a.h = h.const_data_ptr();
    a.weight = w.const_data_ptr();
    a.rstd = rstd.const_data_ptr<float>();
    a.dh = r.defined() ? r.const_data_ptr() : nullptr;
    a.dx = dx.mutable_data_ptr();
    a.one_plus = one_plus;
    if (need_dw) {
      dw = at::empty_like(w);
      ws = at::empty({rms_norm_backward_workspace(rows, cols)}, h.options().dtype(at::kFloat));
      a.dweight = dw.mutable_data_ptr();
      a.workspace = ws.mutable_data_ptr<float>();
    }
    rms_norm_backward(a, s);
  });
  return {dx, dw};
}

struct RmsNormFn : public torch::autograd::Function<RmsNormFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w, double eps,
                            bool one_plus) {
    auto f = norm_forward(x, nullptr, w, eps, one_plus);
    ctx->save_for_backward({f.h, w.contiguous(), f.rstd});
    ctx->saved_data["one_plus"] = one_plus;
    return f.y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto s = ctx->get_saved_variables();
    auto [dx, dw] = norm_backward(grad[0], at::Tensor(), s[0], s[1], s[2], ctx->needs_input_grad(1),
                                  ctx->saved_data["one_plus"].toBool());
    return {dx, dw, at::Tensor(), at::Tensor()};
  }
};

struct AddRmsNormFn : public torch::autograd::Function<AddRmsNormFn> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& delta, const at::Tensor& w,
                               double eps) {
    auto f = norm_forward(x, &delta, w, eps, /*one_plus=*/false);
    ctx->save_for_backward({f.h, w.contiguous(), f.rstd});
    return {f.h, f.y};
  }

  // grad[0] reaches h through the residual stream, grad[1] through the norm; x and delta both
  // get their sum (as an add's backward gives one gradient to both).
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto s = ctx->get_saved_variables();
    auto [dx, dw] = norm_backward(grad[1], grad[0], s[0], s[1], s[2], ctx->needs_input_grad(2), /*one_plus=*/false);
    return {dx, dx, dw, at::Tensor()};
  }
};

}  // namespace

at::Tensor rms_norm_op(const at::Tensor& x, const at::Tensor& weight, double eps) {
  check_inputs(x, weight, nullptr);
  return RmsNormFn::apply(x, weight, eps, false);
}

// Qwen3's q/k norms on the 2-D projection [B*T, H*D] with the weight [D]: the same Function over
// rows of D, so the result keeps x's 2-D shape and is no view (the fused RoPE rotates it in place).
at::Tensor head_rms_norm_op(const at::Tensor& x, const at::Tensor& weight, double eps) {
  check_inputs(x, weight, nullptr, /*heads=*/true);
  return RmsNormFn::apply(x, weight, eps, false);
}

// Gemma's norm, T(n * (1 + w)) with w float32 (the fp32 master, or the bf16 weight cast as the ATen path
// casts it), over rows of the weight's width: x's last dim, or each D-wide head of a 2-D projection.
at::Tensor one_plus_rms_norm_op(const at::Tensor& x, const at::Tensor& weight, double eps) {
  check_inputs(x, weight, nullptr, /*heads=*/weight.dim() == 1 && weight.size(0) != x.size(-1), /*one_plus=*/true);
  return RmsNormFn::apply(x, weight, eps, true);
}

std::pair<at::Tensor, at::Tensor> add_rms_norm_op(const at::Tensor& x, const at::Tensor& delta,
                                                  const at::Tensor& weight, double eps) {
  check_inputs(x, weight, &delta);
  auto out = AddRmsNormFn::apply(x, delta, weight, eps);
  return {out[0], out[1]};
}

}  // namespace lf::kernels
