#include "lf/model/grad_sink.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

namespace lf::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// w.to(dtype) whose backward gives the gradient to the sink instead of to w's .grad.
struct CastIntoSink : public torch::autograd::Function<CastIntoSink> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& w, c10::ScalarType dtype, GradSink* sink) {
    ctx->saved_data["sink"] = reinterpret_cast<int64_t>(sink);
    ctx->saved_data["param"] = w;  // a leaf: no cycle, no extra memory
    return w.to(dtype);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    auto* sink = reinterpret_cast<GradSink*>(ctx->saved_data["sink"].toInt());
    sink->take(ctx->saved_data["param"].toTensor(), grad_out[0]);
    return {at::Tensor(), at::Tensor(), at::Tensor()};  // nothing for .grad
  }
};

}  // namespace

at::Tensor cast_for_compute(const at::Tensor& weight, c10::ScalarType dtype, GradSink* sink) {
  if (weight.scalar_type() == dtype) return weight;
  if (sink && weight.requires_grad() && c10::GradMode::is_enabled() && sink->expect(weight))
    return CastIntoSink::apply(weight, dtype, sink);
  return weight.to(dtype);
}

}  // namespace lf::model
