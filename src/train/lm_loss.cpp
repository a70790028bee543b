#include "lf/train/lm_loss.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

#include "lf/model/grad_sink.h"
#include "lf/model/loss.h"

namespace lf::train {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// h [M,C] (target rows only), w [V,C], y [M]. Gradients are computed in forward
// (one pass over the vocabulary) and saved; see the header.
struct ChunkedLmLoss : public torch::autograd::Function<ChunkedLmLoss> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& h, const at::Tensor& w, const at::Tensor& y,
                            int64_t chunk_rows, bool need_grad_h, bool need_grad_w, model::GradSink* sink) {
    ctx->saved_data["sink"] = reinterpret_cast<int64_t>(sink);  // non-null: it takes w's gradient
    if (sink) ctx->saved_data["param"] = w;
    const int64_t m = h.size(0);
    const auto wc = w.scalar_type() == h.scalar_type() ? w : w.to(h.scalar_type());  // [V,C] compute dtype
    auto total = at::zeros({}, h.options().dtype(at::kFloat));
    at::Tensor grad_h, grad_w;
    if (need_grad_h) grad_h = at::empty({m, h.size(1)}, h.options().dtype(at::kFloat));
    if (need_grad_w) grad_w = at::zeros(w.sizes(), w.options().dtype(at::kFloat));
    for (int64_t begin = 0; begin < m; begin += chunk_rows) {
      const int64_t rows = std::min(chunk_rows, m - begin);
      auto hc = h.narrow(0, begin, rows);  // [r,C]
      auto yc = y.narrow(0, begin, rows);  // [r]
      auto logits = at::matmul(hc, wc.t()).to(at::kFloat);  // [r,V] fp32
      auto lse = at::logsumexp(logits, -1);                  // [r]
      auto picked = logits.gather(1, yc.unsqueeze(1)).squeeze(1);
      total.add_((lse - picked).sum());
      if (need_grad_h || need_grad_w) {
        // d(sum CE)/d logits = softmax - onehot, reusing the logits buffer.
        auto dlogits = logits.sub_(lse.unsqueeze(1)).exp_();
        dlogits.scatter_add_(1, yc.unsqueeze(1), at::full({rows, 1}, -1.0f, dlogits.options()));
        auto dl = dlogits.scalar_type() == h.scalar_type() ? dlogits : dlogits.to(h.scalar_type());
        if (need_grad_h) grad_h.narrow(0, begin, rows).copy_(at::matmul(dl, wc));
        if (need_grad_w) grad_w.add_(at::matmul(dl.t(), hc));
      }
    }
    ctx->save_for_backward({grad_h, grad_w});
    ctx->saved_data["h_dtype"] = static_cast<int64_t>(h.scalar_type());
    ctx->saved_data["w_dtype"] = static_cast<int64_t>(w.scalar_type());
    return total;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    const auto& g = grad_outputs[0];  // 0-dim
    at::Tensor gh, gw;
    if (saved[0].defined())
      gh = (saved[0] * g.to(at::kFloat)).to(static_cast<c10::ScalarType>(ctx->saved_data["h_dtype"].toInt()));
    if (saved[1].defined())
      gw = (saved[1] * g.to(at::kFloat)).to(static_cast<c10::ScalarType>(ctx->saved_data["w_dtype"].toInt()));
    if (auto* sink = reinterpret_cast<model::GradSink*>(ctx->saved_data["sink"].toInt()); sink && gw.defined()) {
      sink->take(ctx->saved_data["param"].toTensor(), gw);
      gw = at::Tensor();
    }
    return {gh, gw, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor target_rows_of(const at::Tensor& cpu_labels) {
  const int64_t t = cpu_labels.size(1);
  return at::nonzero(cpu_labels.narrow(1, 1, t - 1).reshape({-1}) != model::kIgnoreIndex).squeeze(1);
}

at::Tensor lm_head_loss_sum(const at::Tensor& normed_hidden, const at::Tensor& weight, const at::Tensor& labels,
                            int64_t chunk_rows, const at::Tensor& target_rows, model::GradSink* grad_sink) {
  const int64_t b = normed_hidden.size(0), t = normed_hidden.size(1), c = normed_hidden.size(2);
  auto h = normed_hidden.narrow(1, 0, t - 1).reshape({b * (t - 1), c});  // [B*(T-1), C]
  auto y = labels.narrow(1, 1, t - 1).reshape({-1}).to(h.device());      // [B*(T-1)]
  auto rows = target_rows.defined() ? target_rows.to(h.device(), /*non_blocking=*/true)
                                     : at::nonzero(y != model::kIgnoreIndex).squeeze(1);  // [M]
  if (rows.numel() == 0) return (normed_hidden.sum() * 0).to(at::kFloat);  // numel: known on the host
  auto hs = h.index_select(0, rows);  // [M, C]: only target positions reach lm_head
  auto ys = y.index_select(0, rows);
  if (chunk_rows <= 0) chunk_rows = std::max<int64_t>(1, (int64_t{1} << 30) / (4 * weight.size(0)));
  const bool grad_on = c10::GradMode::is_enabled();
  const bool grad_w = grad_on && weight.requires_grad();
  model::GradSink* sink = grad_w && grad_sink && grad_sink->expect(weight) ? grad_sink : nullptr;
  return ChunkedLmLoss::apply(hs, weight, ys, chunk_rows, grad_on && hs.requires_grad(), grad_w, sink);
}

}  // namespace lf::train
