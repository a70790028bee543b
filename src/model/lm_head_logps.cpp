#include "lf/model/lm_head_logps.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

#include "lf/common/error.h"
#include "lf/kernels/fused_ops.h"
#include "lf/model/fused_dispatch.h"
#include "lf/model/grad_sink.h"
#include "lf/model/kernel_paths.h"
#include "lf/model/loss.h"
#include "lm_head_weight_grad.h"

namespace lf::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The cross-entropy kernel (lf/kernels/cross_entropy.h) where the build has it and LF_FUSED_CE is on (a GPU):
// the chunk's logits stay in the compute dtype, read twice and written once (~6 bytes an element), where
// the ATen chunk's fp32 cast, log_softmax, exp, negation, scatter and casts back cost ~40; the 1.5B full DPO
// step spent ~20 ms a step in those (12-06 trace). Off a GPU the ATen chunk keeps get_batch_logps' bits.
const kernels::FusedOps* fused_for(const at::Tensor& h) { return kernel_paths().fused_ce ? fused_ops_for(h) : nullptr; }

// One chunk's forward through the kernel: its log-probabilities and logsumexps into out/lse (rows from
// `begin`), and with unit_gh the rows' unit gradient (onehot - softmax) W.
void fused_forward_chunk(const kernels::FusedOps& fused, const at::Tensor& hc, const at::Tensor& wc,
                         const at::Tensor& yc, int64_t begin, at::Tensor& out, at::Tensor& lse, at::Tensor* unit_gh) {
  const int64_t rows = hc.size(0);
  auto logits = at::matmul(hc, wc.t());  // [r,V] compute dtype, then softmax - onehot in place
  const auto picked = logits.gather(1, yc.unsqueeze(1)).squeeze(1).to(at::kFloat);  // read before the kernel
  const auto ce = fused.cross_entropy_rows(logits, yc, kIgnoreIndex, at::Tensor());  // lse - x[y]
  out.narrow(0, begin, rows).copy_(ce.neg());
  lse.narrow(0, begin, rows).copy_(ce + picked);
  if (unit_gh) unit_gh->narrow(0, begin, rows).copy_(at::matmul(logits, wc).neg_());
}

// h [M,C], w [V,C], y [M]. Saves h, w, y and each row's logsumexp [M]; backward recomputes the
// chunk's logits: d logp_r / d logits_r = onehot(y_r) - softmax_r, scaled by the row's gradient.
struct ChunkedLogps : public torch::autograd::Function<ChunkedLogps> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& h, const at::Tensor& w, const at::Tensor& y,
                            int64_t chunk_rows, bool need_grad_h, bool need_grad_w, GradSink* sink) {
    const int64_t m = h.size(0);
    const auto wc = w.scalar_type() == h.scalar_type() ? w : w.to(h.scalar_type());  // [V,C] compute dtype
    auto out = at::empty({m}, h.options().dtype(at::kFloat));
    auto lse_all = at::empty({m}, h.options().dtype(at::kFloat));
    // A frozen weight (LoRA): each row's gradient is its own upstream gradient times (onehot - softmax) W, so
    // that [M,C] product is made here from the logits at hand, and backward only scales it (no second pass
    // over the vocabulary). A trained weight needs the upstream gradients inside its sum: recomputed then.
    const bool unit_h = need_grad_h && !need_grad_w;
    at::Tensor unit_gh;
    if (unit_h) unit_gh = at::empty_like(h);
    const auto* fused = fused_for(h);
    for (int64_t begin = 0; begin < m; begin += chunk_rows) {
      const int64_t rows = std::min(chunk_rows, m - begin);
      if (fused) {
        fused_forward_chunk(*fused, h.narrow(0, begin, rows), wc, y.narrow(0, begin, rows), begin, out, lse_all,
                            unit_h ? &unit_gh : nullptr);
        continue;
      }
      auto logits = at::matmul(h.narrow(0, begin, rows), wc.t()).to(at::kFloat);  // [r,V]
      // log_softmax, then the target's: the kernel LLaMA-Factory's get_batch_logps runs (same last bits).
      const auto yc = y.narrow(0, begin, rows).unsqueeze(1);
      auto logsm = at::log_softmax(logits, -1);
      const auto picked = logsm.gather(1, yc).squeeze(1);
      out.narrow(0, begin, rows).copy_(picked);
      lse_all.narrow(0, begin, rows).copy_(logits.gather(1, yc).squeeze(1) - picked);  // logsumexp
      if (unit_h) {
        auto d = logsm.exp_().neg_();  // -softmax, in place of the log-probabilities
        d.scatter_add_(1, yc, at::ones({rows, 1}, d.options()));
        unit_gh.narrow(0, begin, rows).copy_(at::matmul(d.to(h.scalar_type()), wc));
      }
    }
    ctx->saved_data["unit_h"] = unit_h;
    ctx->saved_data["chunk"] = chunk_rows;
    ctx->saved_data["need_h"] = need_grad_h;
    ctx->saved_data["need_w"] = need_grad_w;
    save_lm_head_sink(ctx, sink, w);
    if (unit_h) ctx->save_for_backward({unit_gh});
    else ctx->save_for_backward({h, w, y, lse_all});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    const auto g = grad_outputs[0].to(at::kFloat);  // [M]
    if (ctx->saved_data["unit_h"].toBool())
      return {(saved[0].to(at::kFloat) * g.unsqueeze(1)).to(saved[0].scalar_type()), at::Tensor(), at::Tensor(),
              at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    const auto &h = saved[0], &w = saved[1], &y = saved[2], &lse_all = saved[3];
    const int64_t chunk = ctx->saved_data["chunk"].toInt(), m = h.size(0);
    const bool need_h = ctx->saved_data["need_h"].toBool(), need_w = ctx->saved_data["need_w"].toBool();
    const auto wc = w.scalar_type() == h.scalar_type() ? w : w.to(h.scalar_type());
    at::Tensor gh, gw;
    if (need_h) gh = at::empty_like(h);
    if (need_w) gw = at::zeros(w.sizes(), w.options().dtype(at::kFloat));
    const auto* fused = fused_for(h);
    for (int64_t begin = 0; begin < m; begin += chunk) {
      const int64_t rows = std::min(chunk, m - begin);
      auto hc = h.narrow(0, begin, rows);
      if (fused) {  // g (onehot - softmax) = (-g) (softmax - onehot): the kernel's row scale
        auto dl = at::matmul(hc, wc.t());
        (void)fused->cross_entropy_rows(dl, y.narrow(0, begin, rows), kIgnoreIndex, g.narrow(0, begin, rows).neg());
        if (need_h) gh.narrow(0, begin, rows).copy_(at::matmul(dl, wc));
        if (need_w) gw.add_(at::matmul(dl.t(), hc));
        continue;
      }
      auto logits = at::matmul(hc, wc.t()).to(at::kFloat);  // [r,V], then its gradient in place
      auto d = logits.sub_(lse_all.narrow(0, begin, rows).unsqueeze(1)).exp_().neg_();  // -softmax
      d.scatter_add_(1, y.narrow(0, begin, rows).unsqueeze(1), at::ones({rows, 1}, d.options()));
      d.mul_(g.narrow(0, begin, rows).unsqueeze(1));
      auto dc = d.scalar_type() == h.scalar_type() ? d : d.to(h.scalar_type());
      if (need_h) gh.narrow(0, begin, rows).copy_(at::matmul(dc, wc));
      if (need_w) gw.add_(at::matmul(dc.t(), hc).to(at::kFloat));
    }
    const auto gw_out = need_w ? lm_head_weight_grad(ctx, gw, w.scalar_type()) : at::Tensor();
    return {gh, gw_out, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor chunked_lm_head_logps(const at::Tensor& rows, const at::Tensor& weight, const at::Tensor& targets,
                                 int64_t chunk_rows, GradSink* grad_sink) {
  LF_CHECK(rows.dim() == 2 && targets.dim() == 1 && rows.size(0) == targets.size(0) && chunk_rows > 0, ConfigError,
           "LM head log-probabilities: rows [M,C], targets [M] and a positive chunk expected");
  const bool grad_on = c10::GradMode::is_enabled();
  const bool grad_w = grad_on && weight.requires_grad();
  GradSink* sink = grad_w && grad_sink && grad_sink->expect(weight) ? grad_sink : nullptr;
  return ChunkedLogps::apply(rows, weight, targets, chunk_rows, grad_on && rows.requires_grad(), grad_w, sink);
}

}  // namespace lf::model
