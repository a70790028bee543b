#include "lf/model/backward_only_linear.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "lf/model/kernel_paths.h"

namespace lf::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct BackwardOnlyLinear : public torch::autograd::Function<BackwardOnlyLinear> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w) {
    ctx->save_for_backward({x, w});
    auto sizes = x.sizes().vec();
    sizes.back() = w.size(0);
    return at::empty(sizes, x.options());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto& w = saved[1];
    const auto g = grad_out[0].reshape({-1, w.size(0)});
    at::Tensor dx, dw;
    if (ctx->needs_input_grad(0)) dx = at::mm(g, w).view(x.sizes());
    if (ctx->needs_input_grad(1)) dw = at::mm(g.t(), x.reshape({-1, x.size(-1)}));
    return {dx, dw};
  }
};

}  // namespace

at::Tensor backward_only_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  // The bias outside the node (autograd's inputs must be defined tensors): an add whose backward
  // is the sum over rows. o_proj and down_proj have none in Llama / Qwen.
  const auto y = BackwardOnlyLinear::apply(x, w);
  return b.defined() ? y + b : y;
}

bool lean_recompute_enabled() { return kernel_paths().lean_recompute; }

}  // namespace lf::model
