#include "lf/model/lm_head_asft.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

#include "lf/common/error.h"
#include "lf/model/grad_sink.h"
#include "lm_head_weight_grad.h"

namespace lf::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor in_dtype(const at::Tensor& t, c10::ScalarType dtype) { return t.scalar_type() == dtype ? t : t.to(dtype); }

// The reference's distribution over a chunk: [r,V] fp32, softmaxed in the reference's compute dtype (LLaMA-Factory's
// F.softmax(ref_logits) on the frozen copy's logits), then promoted as F.kl_div promotes it.
at::Tensor ref_probs(const at::Tensor& ref_h, const at::Tensor& ref_w) {
  return at::softmax(at::matmul(ref_h, in_dtype(ref_w, ref_h.scalar_type()).t()), -1).to(at::kFloat);
}

// h [M,C], w [V,C], y [M], rh [M,C], rw [V,C]. Saves them and each row's logsumexp [M].
struct ChunkedAsft : public torch::autograd::Function<ChunkedAsft> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& h, const at::Tensor& w, const at::Tensor& y,
                            const at::Tensor& rh, const at::Tensor& rw, double alpha, int64_t chunk_rows,
                            bool need_grad_h, bool need_grad_w, GradSink* sink) {
    const int64_t m = h.size(0);
    const auto wc = in_dtype(w, h.scalar_type());  // [V,C] compute dtype
    auto out = at::empty({m}, h.options().dtype(at::kFloat));
    auto lse_all = at::empty({m}, h.options().dtype(at::kFloat));
    for (int64_t begin = 0; begin < m; begin += chunk_rows) {
      const int64_t rows = std::min(chunk_rows, m - begin);
      const auto logits = at::matmul(h.narrow(0, begin, rows), wc.t()).to(at::kFloat);  // [r,V]
      const auto yc = y.narrow(0, begin, rows).unsqueeze(1);
      const auto logp = at::log_softmax(logits, -1);
      const auto picked = logp.gather(1, yc).squeeze(1);  // -ce, the kernel F.cross_entropy runs
      const auto q = ref_probs(rh.narrow(0, begin, rows), rw);
      const auto kl = (at::xlogy(q, q) - q * logp).sum(-1);  // F.kl_div(logp, q, reduction="none").sum(-1)
      out.narrow(0, begin, rows).copy_(-(picked.exp() * picked) + alpha * kl);
      lse_all.narrow(0, begin, rows).copy_(logits.gather(1, yc).squeeze(1) - picked);
    }
    ctx->saved_data["alpha"] = alpha;
    ctx->saved_data["chunk"] = chunk_rows;
    ctx->saved_data["need_h"] = need_grad_h;
    ctx->saved_data["need_w"] = need_grad_w;
    save_lm_head_sink(ctx, sink, w);
    ctx->save_for_backward({h, w, y, lse_all, rh, rw});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const auto g = grad_outputs[0].to(at::kFloat);  // [M]
    const auto &h = saved[0], &w = saved[1], &y = saved[2], &lse_all = saved[3], &rh = saved[4], &rw = saved[5];
    const double alpha = ctx->saved_data["alpha"].toDouble();
    const int64_t chunk = ctx->saved_data["chunk"].toInt(), m = h.size(0);
    const bool need_h = ctx->saved_data["need_h"].toBool(), need_w = ctx->saved_data["need_w"].toBool();
    const auto wc = in_dtype(w, h.scalar_type());
    at::Tensor gh, gw;
    if (need_h) gh = at::empty_like(h);
    if (need_w) gw = at::zeros(w.sizes(), w.options().dtype(at::kFloat));
    for (int64_t begin = 0; begin < m; begin += chunk) {
      const int64_t rows = std::min(chunk, m - begin);
      const auto hc = h.narrow(0, begin, rows);
      const auto yc = y.narrow(0, begin, rows).unsqueeze(1);
      auto p = at::matmul(hc, wc.t()).to(at::kFloat).sub_(lse_all.narrow(0, begin, rows).unsqueeze(1)).exp_();
      const auto wt = p.gather(1, yc);  // [r,1] DFT's weight
      // (w + alpha) p - w onehot(y) - alpha q, times the row's upstream gradient.
      auto d = p.mul_(wt + alpha).sub_(ref_probs(rh.narrow(0, begin, rows), rw).mul_(alpha));
      d.scatter_add_(1, yc, -wt);
      d.mul_(g.narrow(0, begin, rows).unsqueeze(1));
      const auto dc = in_dtype(d, h.scalar_type());
      if (need_h) gh.narrow(0, begin, rows).copy_(at::matmul(dc, wc));
      if (need_w) gw.add_(at::matmul(dc.t(), hc).to(at::kFloat));
    }
    const auto gw_out = need_w ? lm_head_weight_grad(ctx, gw, w.scalar_type()) : at::Tensor();
    return {gh, gw_out, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor chunked_lm_head_asft(const at::Tensor& rows, const at::Tensor& weight, const at::Tensor& targets,
                                const at::Tensor& ref_rows, const at::Tensor& ref_weight, double alpha,
                                int64_t chunk_rows, GradSink* grad_sink) {
  LF_CHECK(rows.dim() == 2 && targets.dim() == 1 && rows.size(0) == targets.size(0) && chunk_rows > 0 &&
               ref_rows.sizes() == rows.sizes() && ref_weight.size(0) == weight.size(0),
           ConfigError, "ASFT head: rows [M,C], ref_rows [M,C], targets [M], weights of one vocabulary and a positive "
           "chunk expected");
  const bool grad_on = c10::GradMode::is_enabled();
  const bool grad_w = grad_on && weight.requires_grad();
  GradSink* sink = grad_w && grad_sink && grad_sink->expect(weight) ? grad_sink : nullptr;
  return ChunkedAsft::apply(rows, weight, targets, ref_rows.detach(), ref_weight.detach(), alpha, chunk_rows,
                            grad_on && rows.requires_grad(), grad_w, sink);
}

}  // namespace lf::model
