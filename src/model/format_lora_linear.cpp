#include "lf/model/format_lora_linear.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "lf/common/error.h"
#include "lf/model/linear_format.h"

namespace lf::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The format and the (frozen, maybe undefined) bias ride by pointer: autograd's inputs must be
// defined tensors, and neither gets a gradient.
struct FormatLoraLinear : public torch::autograd::Function<FormatLoraLinear> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& a, const at::Tensor& b,
                            const LinearFormat* f, const at::Tensor* bias, double scaling, bool base_values) {
    const int64_t out = f->out_features();
    const auto x2 = x.reshape({-1, x.size(-1)});
    const auto u = at::mm(x2, a.t());  // [N, r]
    auto sizes = x.sizes().vec();
    sizes.back() = out;
    // Not a view of anything autograd saw: the fused RoPE rotates q and k in place.
    auto y = base_values ? f->product(x, *bias) : at::empty(sizes, x.options());
    if (base_values) y.view({-1, out}).addmm_(u, b.t(), 1.0, scaling);
    ctx->save_for_backward({x2, a, b, u});
    ctx->saved_data["format"] = reinterpret_cast<int64_t>(f);
    ctx->saved_data["scaling"] = scaling;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const auto s = ctx->get_saved_variables();
    const auto &x2 = s[0], &a = s[1], &b = s[2], &u = s[3];
    const auto* f = reinterpret_cast<const LinearFormat*>(ctx->saved_data["format"].toInt());
    const double scaling = ctx->saved_data["scaling"].toDouble();
    const auto g = grad_out[0].reshape({-1, f->out_features()});
    const auto gu = at::mm(g, b).mul_(scaling);  // [N, r]: the adapter's hidden gradient
    at::Tensor dx, da, db;
    if (ctx->needs_input_grad(0)) {
      dx = f->product_grad_input(g);
      dx.addmm_(gu, a);  // the adapter's input gradient added by the GEMM, not by autograd
      auto sizes = grad_out[0].sizes().vec();
      sizes.back() = f->in_features();
      dx = dx.view(sizes);
    }
    if (ctx->needs_input_grad(1)) da = at::mm(gu.t(), x2);
    if (ctx->needs_input_grad(2)) db = at::mm(g.t(), u).mul_(scaling);
    return {dx, da, db, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

// A format's default: none (has_product false); Linear never asks such a format.
at::Tensor LinearFormat::product(const at::Tensor&, const at::Tensor&) const {
  LF_THROW(BackendError, "the {} format has no product outside autograd (has_product is false)", name());
}
at::Tensor LinearFormat::product_grad_input(const at::Tensor&) const {
  LF_THROW(BackendError, "the {} format has no input gradient outside autograd (has_product is false)", name());
}

at::Tensor format_lora_linear(const at::Tensor& x, const LinearFormat& f, const at::Tensor& bias, const at::Tensor& a,
                              const at::Tensor& b, double scaling, bool base_values) {
  return FormatLoraLinear::apply(x, a, b, &f, &bias, scaling, base_values);
}

}  // namespace lf::model
