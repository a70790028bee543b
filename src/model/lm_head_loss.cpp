#include "lf/model/lm_head_loss.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

#include "lf/model/kernel_paths.h"
#include "lf/common/error.h"
#include "lf/kernels/fused_ops.h"
#include "lf/model/fused_dispatch.h"
#include "lf/model/grad_sink.h"
#include "lf/model/loss.h"
#include "lm_head_weight_grad.h"

namespace lf::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// h [M,C] (target rows only), w [V,C], y [M]. Gradients are computed in forward
// (one pass over the vocabulary) and saved; see the header. masked: y may hold kIgnoreIndex,
// whose rows count nothing and get no gradient (their [r,C] rows are zeroed, never the [r,V]
// logits: the mask costs no pass over the vocabulary).
struct ChunkedLmLoss : public torch::autograd::Function<ChunkedLmLoss> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& h, const at::Tensor& w, const at::Tensor& y,
                            int64_t chunk_rows, bool need_grad_h, bool need_grad_w, model::GradSink* sink,
                            bool masked) {
    save_lm_head_sink(ctx, sink, w);
    const int64_t m = h.size(0);
    const auto wc = w.scalar_type() == h.scalar_type() ? w : w.to(h.scalar_type());  // [V,C] compute dtype
    auto total = at::zeros({}, h.options().dtype(at::kFloat));
    at::Tensor grad_h, grad_w;
    if (need_grad_h) grad_h = at::empty({m, h.size(1)}, h.options().dtype(at::kFloat));
    if (need_grad_w) grad_w = at::zeros(w.sizes(), w.options().dtype(at::kFloat));
    // The fused kernel (cross_entropy.h) where the build has it: the loss and the logits'
    // gradient in one pass over the compute-dtype chunk, ignored rows zeroed.
    const auto* fused = kernel_paths().fused_ce && (need_grad_h || need_grad_w) ? fused_ops_for(h) : nullptr;
    for (int64_t begin = 0; begin < m; begin += chunk_rows) {
      const int64_t rows = std::min(chunk_rows, m - begin);
      auto hc = h.narrow(0, begin, rows);  // [r,C]
      auto yc = y.narrow(0, begin, rows);  // [r]
      if (fused) {
        auto dl = at::matmul(hc, wc.t());  // [r,V]: logits, then their gradient
        total.add_(fused->cross_entropy_rows(dl, yc, kIgnoreIndex, at::Tensor()).sum());
        if (need_grad_h) grad_h.narrow(0, begin, rows).copy_(at::matmul(dl, wc));
        if (need_grad_w) grad_w.add_(at::matmul(dl.t(), hc));
        continue;
      }
      at::Tensor keep;                     // [r] 1: a target row (masked only)
      if (masked) {
        keep = yc.ne(kIgnoreIndex);
        yc = yc.clamp_min(0);  // any real index: the row's terms are multiplied by 0 below
      }
      auto logits = at::matmul(hc, wc.t()).to(at::kFloat);  // [r,V] fp32
      auto lse = at::logsumexp(logits, -1);                  // [r]
      auto picked = logits.gather(1, yc.unsqueeze(1)).squeeze(1);
      total.add_(masked ? ((lse - picked) * keep).sum() : (lse - picked).sum());
      if (masked) hc = hc * keep.unsqueeze(1).to(hc.scalar_type());  // no weight gradient from ignored rows
      if (need_grad_h || need_grad_w) {
        // d(sum CE)/d logits = softmax - onehot, reusing the logits buffer.
        auto dlogits = logits.sub_(lse.unsqueeze(1)).exp_();
        dlogits.scatter_add_(1, yc.unsqueeze(1), at::full({rows, 1}, -1.0f, dlogits.options()));
        auto dl = dlogits.scalar_type() == h.scalar_type() ? dlogits : dlogits.to(h.scalar_type());
        if (need_grad_h && masked) grad_h.narrow(0, begin, rows).copy_(at::matmul(dl, wc) * keep.unsqueeze(1));
        else if (need_grad_h) grad_h.narrow(0, begin, rows).copy_(at::matmul(dl, wc));
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
      gw = lm_head_weight_grad(ctx, saved[1] * g.to(at::kFloat),
                               static_cast<c10::ScalarType>(ctx->saved_data["w_dtype"].toInt()));
    return {gh, gw, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

void save_lm_head_sink(AutogradContext* ctx, GradSink* sink, const at::Tensor& weight) {
  ctx->saved_data["sink"] = reinterpret_cast<int64_t>(sink);  // non-null: it takes the weight's gradient
  if (sink) ctx->saved_data["param"] = weight;
}

at::Tensor lm_head_weight_grad(AutogradContext* ctx, const at::Tensor& grad_w, c10::ScalarType weight_dtype) {
  auto* sink = reinterpret_cast<GradSink*>(ctx->saved_data["sink"].toInt());
  if (!sink) return grad_w.to(weight_dtype);
  // fp32 into the sink, whatever the weight's dtype: a bf16 weight (ZeRO keeps its
  // parameters in the compute dtype) must not round the gradient before it accumulates.
  sink->take(ctx->saved_data["param"].toTensor(), grad_w);
  return at::Tensor();
}

namespace {

at::Tensor apply_chunked(const at::Tensor& rows, const at::Tensor& weight, const at::Tensor& targets,
                         int64_t chunk_rows, GradSink* grad_sink, bool masked) {
  LF_CHECK(rows.dim() == 2 && targets.dim() == 1 && rows.size(0) == targets.size(0) && chunk_rows > 0, ConfigError,
           "LM head loss: rows [M,C], targets [M] and a positive chunk expected");
  const bool grad_on = c10::GradMode::is_enabled();
  const bool grad_w = grad_on && weight.requires_grad();
  GradSink* sink = grad_w && grad_sink && grad_sink->expect(weight) ? grad_sink : nullptr;
  return ChunkedLmLoss::apply(rows, weight, targets, chunk_rows, grad_on && rows.requires_grad(), grad_w, sink,
                              masked);
}

}  // namespace

at::Tensor chunked_lm_head_ce_sum(const at::Tensor& rows, const at::Tensor& weight, const at::Tensor& targets,
                                  int64_t chunk_rows, GradSink* grad_sink) {
  return apply_chunked(rows, weight, targets, chunk_rows, grad_sink, /*masked=*/false);
}

at::Tensor chunked_lm_head_ce_sum_masked(const at::Tensor& rows, const at::Tensor& weight, const at::Tensor& targets,
                                         int64_t chunk_rows, GradSink* grad_sink) {
  return apply_chunked(rows, weight, targets, chunk_rows, grad_sink, /*masked=*/true);
}

}  // namespace lf::model
