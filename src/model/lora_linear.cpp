#include "lf/model/lora_linear.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <optional>

#include "lf/model/kernel_paths.h"

namespace lf::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct LoraLinear : public torch::autograd::Function<LoraLinear> {
  // bias rides as a non-differentiable argument (frozen; autograd's inputs must be defined).
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w, const at::Tensor& a,
                            const at::Tensor& b, std::optional<at::Tensor> bias, double scaling, bool base_values) {
    auto sizes = x.sizes().vec();
    sizes.back() = w.size(0);
    const auto x2 = x.reshape({-1, x.size(-1)});
    const auto u = at::mm(x2, a.t());  // [N, r]
    // Written through a 2-D view, returned whole: an output that is a view could not be rotated
    // in place (the fused RoPE does that to q and k), autograd forbids it for custom nodes.
    auto y = at::empty(sizes, x.options());
    if (base_values) {
      auto y2 = y.view({-1, w.size(0)});
      if (bias) {
        at::addmm_out(y2, *bias, x2, w.t());
      } else {
        at::mm_out(y2, x2, w.t());
      }
      y2.addmm_(u, b.t(), 1.0, scaling);
    }
    ctx->save_for_backward({x2, w, a, b, u});
    ctx->saved_data["scaling"] = scaling;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const auto s = ctx->get_saved_variables();
    const auto &x2 = s[0], &w = s[1], &a = s[2], &b = s[3], &u = s[4];
    const double scaling = ctx->saved_data["scaling"].toDouble();
    const auto g = grad_out[0].reshape({-1, w.size(0)});
    const auto gu = at::mm(g, b).mul_(scaling);  // [N, r]: the adapter's hidden gradient
    at::Tensor dx, da, db;
    if (ctx->needs_input_grad(0)) {
      dx = at::mm(g, w);
      dx.addmm_(gu, a);  // the adapter's input gradient added by the GEMM, not by autograd
    }
    if (ctx->needs_input_grad(2)) da = at::mm(gu.t(), x2);
    if (ctx->needs_input_grad(3)) db = at::mm(g.t(), u).mul_(scaling);
    auto sizes = grad_out[0].sizes().vec();
    sizes.back() = w.size(1);
    return {dx.defined() ? dx.view(sizes) : dx, at::Tensor(), da, db, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor lora_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias, const at::Tensor& a,
                       const at::Tensor& b, double scaling, bool base_values) {
  return LoraLinear::apply(x, w, a, b, bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt, scaling,
                           base_values);
}

bool fused_lora_enabled() { return kernel_paths().fused_lora; }

}  // namespace lf::model
