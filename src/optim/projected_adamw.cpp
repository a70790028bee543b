#include "projected_adamw.h"

#include <c10/core/GradMode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "lf/common/error.h"
#include "lf/optim/grad_utils.h"
#include "param_roles.h"

namespace lf::optim {

ProjectedAdamW::ProjectedAdamW(const OptimizerInputs& in, const std::vector<std::string>& targets, bool layerwise,
                               std::string_view what)
    : in_(in), lr_(in.learning_rate), layerwise_(layerwise) {
  // LLaMA-Factory's parser: "Distributed training does not support layer-wise GaLore/APOLLO" (the
  // optimizer's "Per-layer ... does not support gradient accumulation" is a plan rule: optimizer_keys.cpp).
  LF_CHECK(!layerwise || in.world == 1, ConfigError,
           "{} layer-wise under {} ranks: LLaMA-Factory refuses it (\"Distributed training does not support "
           "layer-wise {}\"): set {}_layerwise false or train on one process",
           what, in.world, what, what == "GaLore" ? "galore" : "apollo");
  const auto target = targeted_params(in.params, targets);
  LF_CHECK(std::find(target.begin(), target.end(), true) != target.end(), ConfigError,
           "{}'s target modules ({}) match no trainable linear weight: name modules such as q_proj, mlp, self_attn, "
           "or all",
           what, fmt::format("{}", fmt::join(targets, ",")));
  // The groups' flat order: non-target without decay, non-target with decay, targets.
  for (int group = 0; group < 3; ++group)
    for (size_t i = 0; i < in.params.size(); ++i) {
      const bool decays = lf_decays(in.params[i].name);
      if (group == 2 ? !target[i] : (target[i] || decays != (group == 1))) continue;
      Slot s;
      s.p = in.params[i];
      s.target = target[i];
      s.weight_decay = group == 0 ? 0.0 : in.weight_decay;
      s.seed = static_cast<int64_t>(slots_.size()) + 1;
      slots_.push_back(std::move(s));
    }
}

void ProjectedAdamW::step(const at::Tensor& grad_factor) {
  c10::NoGradGuard no_grad;
  ++steps_;
  for (auto& s : slots_) {
    auto g = factored_grad(s.p.tensor, grad_factor);
    if (!g.defined()) continue;
    if (s.target) {
      if (!s.projector) s.projector = make_projector(s);
      step_target(s, g);
      continue;
    }
    double step_size = 0;
    const auto direction = legacy_adam_direction(s.adam, g, in_.beta1, in_.beta2, in_.eps, lr_, step_size);
    legacy_adam_apply(s.p.tensor, direction, step_size, lr_, s.weight_decay);
  }
}

void ProjectedAdamW::zero_grad() {
  for (auto& s : slots_)
    if (s.p.tensor.grad().defined()) s.p.tensor.mutable_grad() = at::Tensor();
}

std::vector<StateTensor> ProjectedAdamW::state() const {
  std::vector<StateTensor> out;
  for (const auto& s : slots_) {
    if (!s.adam.exp_avg.defined()) continue;
    out.push_back({s.p.name, "exp_avg", s.adam.exp_avg});
    out.push_back({s.p.name, "exp_avg_sq", s.adam.exp_avg_sq});
    if (!s.projector) continue;
    out.push_back({s.p.name, "ortho", s.projector->ortho().contiguous()});
    if (s.projector->ortho_right().defined()) out.push_back({s.p.name, "ortho_right", s.projector->ortho_right().contiguous()});
    out.push_back({s.p.name, "seed", at::full({1}, s.projector->seed(), at::kLong)});
    if (s.scaled_grad_norm.defined()) out.push_back({s.p.name, "scaled_grad", s.scaled_grad_norm.reshape({1})});
  }
  return out;
}

void ProjectedAdamW::load_state(const StateRead& read, int64_t steps) {
  c10::NoGradGuard no_grad;
  for (auto& s : slots_) {
    const auto& p = s.p.tensor;
    auto shape_of = p;
    if (s.target) {
      s.projector = make_projector(s);
      s.projector->allocate_like(p);
      read(s.p.name, "ortho", s.projector->ortho());
      if (s.projector->ortho_right().defined()) read(s.p.name, "ortho_right", s.projector->ortho_right());
      auto seed = at::zeros({1}, at::kLong);
      read(s.p.name, "seed", seed);
      s.projector->seed() = seed.item<int64_t>();
      shape_of = s.projector->apply(at::zeros_like(p));
      if (name() == "apollo" && steps > 0) {
        s.scaled_grad_norm = at::zeros({1}, p.options());
        read(s.p.name, "scaled_grad", s.scaled_grad_norm);
        s.scaled_grad_norm = s.scaled_grad_norm.reshape({});
      }
    }
    s.adam.exp_avg = at::zeros_like(shape_of);
    s.adam.exp_avg_sq = at::zeros_like(shape_of);
    read(s.p.name, "exp_avg", s.adam.exp_avg);
    read(s.p.name, "exp_avg_sq", s.adam.exp_avg_sq);
    s.adam.step = steps;
  }
  steps_ = steps;
}

}  // namespace lf::optim
