#pragma once
// The AdamW galore-torch and apollo-torch step with (a copy of transformers' deprecated AdamW): bias
// correction folded into the step size, eps outside the square root, decoupled weight decay applied after
// the update (p += -lr x wd x p). Internal to lf_optim.
#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>

namespace lf::optim {

struct LegacyAdamState {
  at::Tensor exp_avg, exp_avg_sq;  // the shape of the gradient the moments follow (low-rank for GaLore)
  int64_t step = 0;
};

// Updates the moments with `grad`; returns exp_avg / (sqrt(exp_avg_sq) + eps) and sets step_size to
// lr x sqrt(1 - b2^t) / (1 - b1^t).
inline at::Tensor legacy_adam_direction(LegacyAdamState& s, const at::Tensor& grad, double b1, double b2, double eps,
                                        double lr, double& step_size) {
  if (!s.exp_avg.defined()) {
    s.exp_avg = at::zeros_like(grad);
    s.exp_avg_sq = at::zeros_like(grad);
  }
  ++s.step;
  s.exp_avg.mul_(b1).add_(grad, 1.0 - b1);
  s.exp_avg_sq.mul_(b2).addcmul_(grad, grad, 1.0 - b2);
  const auto denom = s.exp_avg_sq.sqrt().add_(eps);
  const double t = static_cast<double>(s.step);
  step_size = lr * std::sqrt(1.0 - std::pow(b2, t)) / (1.0 - std::pow(b1, t));
  return s.exp_avg / denom;
}

// The update and the decay after it.
inline void legacy_adam_apply(at::Tensor p, const at::Tensor& direction, double step_size, double lr,
                              double weight_decay) {
  p.add_(direction, -step_size);
  if (weight_decay > 0.0) p.add_(p, -lr * weight_decay);
}

}  // namespace lf::optim
