#include "lf/model/fused_loss.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "lf/common/error.h"
#include "lf/model/loss.h"

namespace lf::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct FusedLinearCrossEntropy : public torch::autograd::Function<FusedLinearCrossEntropy> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& hidden, const at::Tensor& weight,
                            const at::Tensor& labels, int64_t chunk) {
    const int64_t n = hidden.size(0);
    const auto w = weight.scalar_type() == hidden.scalar_type() ? weight : weight.to(hidden.scalar_type());
    const bool want_w = weight.requires_grad();
    const bool want_h = hidden.requires_grad();
    auto grad_h = want_h ? at::empty_like(hidden) : at::Tensor();
    auto grad_w = want_w ? at::zeros(weight.sizes(), weight.options().dtype(at::kFloat)) : at::Tensor();
    auto loss = at::zeros({}, hidden.options().dtype(at::kFloat));
    for (int64_t s = 0; s < n; s += chunk) {
      const int64_t len = std::min(chunk, n - s);
      auto h = hidden.narrow(0, s, len);                           // [n,C]
      auto y = labels.narrow(0, s, len);                           // [n]
      auto logits = at::matmul(h, w.t()).to(at::kFloat);           // [n,V] fp32
      auto lse = at::logsumexp(logits, -1);                        // [n]
      auto valid = y.ne(kIgnoreIndex);                             // [n]
      auto target = y.masked_fill(valid.logical_not(), 0);
      auto picked = logits.gather(1, target.unsqueeze(1)).squeeze(1);
      loss.add_(((lse - picked) * valid).sum());
      if (!want_h && !want_w) continue;
      // d(sum CE)/d logits = softmax - onehot(target), zero on ignored rows.
      auto g = logits.sub_(lse.unsqueeze(1)).exp_();
      g.scatter_add_(1, target.unsqueeze(1), at::full({len, 1}, -1.0f, g.options()));
      g.mul_(valid.unsqueeze(1));
      auto g16 = g.to(hidden.scalar_type());
      if (want_h) grad_h.narrow(0, s, len).copy_(at::matmul(g16, w));  // [n,C]
      if (want_w) grad_w.add_(at::matmul(g16.t(), h));                  // [V,C]
    }
    ctx->saved_data["grad_h"] = grad_h;
    ctx->saved_data["grad_w"] = want_w ? grad_w.to(weight.scalar_type()) : at::Tensor();
    return loss;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const auto& go = grad_out[0];  // scalar
    auto grad_h = ctx->saved_data["grad_h"].toTensor();
    auto grad_w = ctx->saved_data["grad_w"].toTensor();
    if (grad_h.defined()) grad_h = grad_h * go.to(grad_h.scalar_type());
    if (grad_w.defined()) grad_w = grad_w * go.to(grad_w.scalar_type());
    return {grad_h, grad_w, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor fused_linear_cross_entropy_sum(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels,
                                          int64_t chunk_tokens) {
  LF_CHECK(hidden.dim() == 2 && labels.dim() == 1 && hidden.size(0) == labels.size(0), ConfigError,
           "fused CE: hidden [N,C] and labels [N] expected");
  LF_CHECK(chunk_tokens > 0, ConfigError, "fused CE: chunk_tokens must be positive");
  return FusedLinearCrossEntropy::apply(hidden, weight, labels.to(hidden.device(), at::kLong), chunk_tokens);
}

at::Tensor causal_lm_loss_fused(const CausalLM& model, const at::Tensor& hidden, const at::Tensor& labels,
                                bool sum_reduction, int64_t chunk_tokens) {
  const int64_t t = hidden.size(1), c = hidden.size(2);
  auto x = model.final_norm(hidden).narrow(1, 0, t - 1).reshape({-1, c});  // [B*(T-1), C]
  auto y = labels.narrow(1, 1, t - 1).reshape({-1}).to(hidden.device());
  auto sum = fused_linear_cross_entropy_sum(x, model.lm_head_weight(), y, chunk_tokens);
  if (sum_reduction) return sum;
  return sum / y.ne(kIgnoreIndex).sum().clamp_min(1).to(at::kFloat);
}

}  // namespace lf::model
