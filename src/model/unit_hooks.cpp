#include "lf/model/unit_hooks.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

namespace lf::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Identity on the unit's input: its backward runs once the gradient w.r.t. the input is
// complete, i.e. after every node of the unit (autograd runs the later-created nodes of the
// unit first). `anchor` requires grad so the node exists even when x does not (a frozen
// embedding's output under LoRA): then the unit's end is seen, and nothing flows further.
struct UnitInput : public torch::autograd::Function<UnitInput> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& anchor, UnitHooks* hooks,
                            int64_t unit) {
    ctx->saved_data["hooks"] = reinterpret_cast<int64_t>(hooks);
    ctx->saved_data["unit"] = unit;
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    reinterpret_cast<UnitHooks*>(ctx->saved_data["hooks"].toInt())->after_backward(ctx->saved_data["unit"].toInt());
    return {grad_out[0], at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// Identity on the unit's output: its backward is the unit's first.
struct UnitOutput : public torch::autograd::Function<UnitOutput> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& y, UnitHooks* hooks, int64_t unit) {
    ctx->saved_data["hooks"] = reinterpret_cast<int64_t>(hooks);
    ctx->saved_data["unit"] = unit;
    return y.view_as(y);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    reinterpret_cast<UnitHooks*>(ctx->saved_data["hooks"].toInt())->before_backward(ctx->saved_data["unit"].toInt());
    return {grad_out[0], at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor run_unit(UnitHooks* hooks, int64_t unit, const at::Tensor& x,
                    const std::function<at::Tensor(const at::Tensor&)>& fn) {
  if (!hooks) return fn(x);
  const bool graph = c10::GradMode::is_enabled();
  at::Tensor in = x;
  if (graph && x.is_floating_point()) {
    auto anchor = at::empty({0}, x.options()).requires_grad_(!x.requires_grad());
    in = UnitInput::apply(x, anchor, hooks, unit);
  }
  hooks->before_forward(unit, false);
  auto y = fn(in);
  hooks->after_forward(unit, false);
  return graph && y.requires_grad() ? UnitOutput::apply(y, hooks, unit) : y;
}

}  // namespace lf::model
