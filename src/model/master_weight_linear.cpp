#include "lf/model/master_weight_linear.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "lf/model/kernel_paths.h"

namespace lf::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct MasterWeightLinear : public torch::autograd::Function<MasterWeightLinear> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w, bool base_values) {
    const auto wc = w.to(x.scalar_type());  // the per-use cast autocast makes too
    auto sizes = x.sizes().vec();
    sizes.back() = w.size(0);
    const auto x2 = x.reshape({-1, x.size(-1)});
    auto y = at::empty(sizes, x.options());  // returned whole, not a view (lora_linear.cpp says why)
    if (base_values) {
      auto y2 = y.view({-1, w.size(0)});
      at::mm_out(y2, x2, wc.t());
    }
    ctx->save_for_backward({x2, wc});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const auto s = ctx->get_saved_variables();
    const auto &x2 = s[0], &wc = s[1];
    const auto g = grad_out[0].reshape({-1, wc.size(0)});
    at::Tensor dx, dw;
    if (ctx->needs_input_grad(0)) {
      auto sizes = grad_out[0].sizes().vec();
      sizes.back() = wc.size(1);
      dx = at::mm(g, wc).view(sizes);
    }
    if (ctx->needs_input_grad(1)) dw = at::mm(g.t(), x2, at::kFloat);  // fp32 out, fp32 accumulation
    return {dx, dw, at::Tensor()};
  }
};

}  // namespace

at::Tensor master_weight_linear(const at::Tensor& x, const at::Tensor& w, bool base_values) {
  return MasterWeightLinear::apply(x, w, base_values);
}

// Read once: Linear asks on every projection's forward (an environment scan each time otherwise).
bool fp32_weight_grads_enabled() { return kernel_paths().fp32_weight_grads; }

}  // namespace lf::model
