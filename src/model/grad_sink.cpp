#include "lf/model/grad_sink.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <mutex>
#include <shared_mutex>
#include <unordered_map>

namespace lf::model {
namespace {

struct RouteTable {
  std::shared_mutex mu;
  std::unordered_map<const c10::TensorImpl*, GradSink*> routes;
};

RouteTable& route_table() {
  static RouteTable table;
  return table;
}

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

// embedding(w, ids).to(dtype) whose backward gives (ids, gradient rows) to the sink. w is
// not an autograd input: an edge to w would hold w's AccumulateGrad (and a tied lm_head
// gradient waiting there) until this, the last node of backward, has run. A fresh empty
// `anchor` that requires grad puts the node in the graph instead.
struct EmbedIntoSink : public torch::autograd::Function<EmbedIntoSink> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& anchor, const at::Tensor& w, const at::Tensor& ids,
                            c10::ScalarType dtype, GradSink* sink) {
    ctx->saved_data["sink"] = reinterpret_cast<int64_t>(sink);
    ctx->saved_data["param"] = w;
    ctx->saved_data["ids"] = ids;
    auto x = at::embedding(w.detach(), ids);
    return x.scalar_type() == dtype ? x : x.to(dtype);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    auto* sink = reinterpret_cast<GradSink*>(ctx->saved_data["sink"].toInt());
    const auto& param = ctx->saved_data["param"].toTensor();
    const auto& g = grad_out[0];
    sink->take_rows(param, ctx->saved_data["ids"].toTensor().reshape({-1}), g.reshape({-1, g.size(-1)}));
    return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

void set_grad_route(const at::Tensor& param, GradSink* sink) {
  auto& t = route_table();
  std::unique_lock lock(t.mu);
  if (sink) t.routes[param.unsafeGetTensorImpl()] = sink;
  else t.routes.erase(param.unsafeGetTensorImpl());
}

GradSink* grad_route(const at::Tensor& param) {
  auto& t = route_table();
  std::shared_lock lock(t.mu);
  if (t.routes.empty()) return nullptr;
  const auto it = t.routes.find(param.unsafeGetTensorImpl());
  return it == t.routes.end() ? nullptr : it->second;
}

at::Tensor embed_for_compute(const at::Tensor& weight, const at::Tensor& ids, c10::ScalarType dtype,
                             bool* rows_to_sink) {
  GradSink* sink = weight.requires_grad() && c10::GradMode::is_enabled() ? grad_route(weight) : nullptr;
  const bool to_sink = sink && sink->expect_rows(weight);
  if (rows_to_sink) *rows_to_sink = to_sink;
  if (to_sink)
    return EmbedIntoSink::apply(at::empty({0}, weight.options()).requires_grad_(true), weight, ids, dtype, sink);
  auto x = at::embedding(weight, ids);
  return x.scalar_type() == dtype ? x : x.to(dtype);
}

at::Tensor cast_for_compute(const at::Tensor& weight, c10::ScalarType dtype) {
  const bool same = weight.scalar_type() == dtype;
  GradSink* sink = weight.requires_grad() && c10::GradMode::is_enabled() ? grad_route(weight) : nullptr;
  if (same && !(sink && sink->routes_same_dtype())) return weight;
  if (sink && sink->expect(weight)) return CastIntoSink::apply(weight, dtype, sink);
  return same ? weight : weight.to(dtype);
}

}  // namespace lf::model
