#include "lf/model/router_aux_loss.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <vector>

#include "lf/common/error.h"

namespace lf::model {

struct RouterAuxLoss::State {
  int64_t layers = 0;
  at::Tensor mask;          // [N] fp32; undefined: every token counts
  at::Tensor tokens;        // M = Σ mask (0-dim fp32), or N
  double grad_weight = 0;
  std::vector<at::Tensor> counts;     // per sparse layer: [E] fp32, Σ_n m_n·#(e ∈ top-k_n)
  std::vector<at::Tensor> prob_sums;  // per sparse layer: [E] fp32, Σ_n m_n·p_ne (no gradient)

  // f_e of the formula: [E] fp32 over every recorded layer.
  at::Tensor token_fraction() const {
    at::Tensor sum;
    for (const auto& c : counts)
      if (c.defined()) sum = sum.defined() ? sum + c : c;
    return sum / (tokens * static_cast<double>(layers));
  }
};

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The forward's state as autograd's saved data holds it (a capsule).
struct StateHolder : torch::CustomClassHolder {
  explicit StateHolder(std::shared_ptr<RouterAuxLoss::State> s) : state(std::move(s)) {}
  std::shared_ptr<RouterAuxLoss::State> state;
};

// probs in, probs out; the backward adds grad_weight · E · f_e · m_n / (L · M).
struct AuxGradient : public torch::autograd::Function<AuxGradient> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& probs, std::shared_ptr<RouterAuxLoss::State> s) {
    ctx->saved_data["state"] = c10::IValue::make_capsule(c10::make_intrusive<StateHolder>(std::move(s)));
    ctx->saved_data["tokens"] = probs.size(0);
    return probs.clone();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const auto s = c10::static_intrusive_pointer_cast<StateHolder>(ctx->saved_data["state"].toCapsule())->state;
    const auto f = s->token_fraction();  // [E]
    const auto g = f * (s->grad_weight * static_cast<double>(f.size(0))) / (s->tokens * static_cast<double>(s->layers));
    const auto n = ctx->saved_data["tokens"].toInt();
    auto add = s->mask.defined() ? s->mask.unsqueeze(1) * g.unsqueeze(0) : g.unsqueeze(0).expand({n, f.size(0)});
    return {grad_out[0].defined() ? grad_out[0] + add : add.contiguous(), at::Tensor()};
  }
};

}  // namespace

void RouterAuxLoss::begin(const at::Tensor& token_mask, double grad_weight) {
  auto s = std::make_shared<State>();
  s->layers = layers_;
  s->grad_weight = grad_weight;
  s->counts.resize(static_cast<size_t>(layers_));
  s->prob_sums.resize(static_cast<size_t>(layers_));
  if (token_mask.defined()) {
    s->mask = token_mask.reshape({-1}).to(at::kFloat);
    s->tokens = s->mask.sum();
  }
  state_ = std::move(s);
}

at::Tensor RouterAuxLoss::attach(int64_t layer, const at::Tensor& probs) const {
  if (!state_ || state_->grad_weight == 0 || !c10::GradMode::is_enabled() || !probs.requires_grad()) return probs;
  LF_CHECK(layer >= 0 && layer < layers_, BackendError, "router aux loss: sparse layer {} of {}", layer, layers_);
  if (!state_->tokens.defined()) state_->tokens = at::full({}, static_cast<double>(probs.size(0)), probs.options());
  return AuxGradient::apply(probs, state_);
}

void RouterAuxLoss::record(int64_t layer, const at::Tensor& chosen, const at::Tensor& probs) {
  if (!state_) return;
  LF_CHECK(layer >= 0 && layer < layers_, BackendError, "router aux loss: sparse layer {} of {}", layer, layers_);
  auto& s = *state_;
  if (s.counts[static_cast<size_t>(layer)].defined()) return;  // a checkpoint's recompute of this forward
  c10::NoGradGuard no_grad;
  const int64_t n = chosen.size(0), k = chosen.size(1), experts = probs.size(1);
  LF_CHECK(!s.mask.defined() || s.mask.numel() == n, BackendError,
           "router aux loss: the mask has {} tokens, layer {}'s router {}", s.mask.defined() ? s.mask.numel() : 0,
           layer, n);
  if (!s.tokens.defined()) s.tokens = at::full({}, static_cast<double>(n), probs.options().dtype(at::kFloat));
  // Each choice of a token adds its mask to its expert's count.
  const auto weight = s.mask.defined() ? s.mask.unsqueeze(1).expand({n, k}) : at::ones({n, k}, probs.options().dtype(at::kFloat));
  s.counts[static_cast<size_t>(layer)] =
      at::zeros({experts}, probs.options().dtype(at::kFloat)).index_add_(0, chosen.reshape({-1}), weight.reshape({-1}));
  const auto p = probs.detach().to(at::kFloat);
  s.prob_sums[static_cast<size_t>(layer)] = s.mask.defined() ? at::matmul(s.mask, p) : p.sum(0);
}

at::Tensor RouterAuxLoss::value() const {
  if (!state_) return {};
  const auto& s = *state_;
  at::Tensor probs;
  for (const auto& p : s.prob_sums)
    if (p.defined()) probs = probs.defined() ? probs + p : p;
  if (!probs.defined()) return {};
  const auto p_mean = probs / (s.tokens * static_cast<double>(s.layers));
  return (s.token_fraction() * p_mean).sum() * static_cast<double>(probs.size(0));
}

}  // namespace lf::model
