#include "lf/optim/grad_utils.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>

namespace lf::optim {

namespace {

std::vector<at::Tensor> defined_grads(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  return grads;
}

// torch's global norm over `grads` (non-empty).
at::Tensor norm_of(const std::vector<at::Tensor>& grads) {
  // torch: the norm of the per-tensor norms (one multi-tensor launch per device / dtype group).
  std::vector<at::Tensor> norms;
  for (const auto& n : at::_foreach_norm(grads, 2)) norms.push_back(n.to(at::kFloat).to(grads[0].device()));
  return at::linalg_vector_norm(at::stack(norms), 2);
}

}  // namespace

at::Tensor global_grad_norm(const std::vector<at::Tensor>& params) {
  c10::NoGradGuard no_grad;
  const auto grads = defined_grads(params);
  return grads.empty() ? at::Tensor() : norm_of(grads);
}

at::Tensor clip_factor(const at::Tensor& norm, double max_norm) {
  return at::clamp_max(max_norm / (norm + 1e-6), 1.0);
}

double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm) {
  c10::NoGradGuard no_grad;
  const auto grads = defined_grads(params);
  if (grads.empty()) return 0.0;
  const auto total = norm_of(grads);
  if (max_norm > 0) at::_foreach_mul_(grads, clip_factor(total, max_norm).to(grads[0].scalar_type()));
  return total.item<double>();
}

bool unscale_gradients(const std::vector<at::Tensor>& params, double scale) {
  c10::NoGradGuard no_grad;
  const double inv = 1.0 / scale;
  // One flag per device, one host sync at the end (not one per parameter).
  at::Tensor found;
  for (const auto& p : params) {
    auto g = p.grad();
    if (!g.defined()) continue;
    auto bad = at::logical_not(at::isfinite(g).all()).to(at::kFloat);
    found = found.defined() ? at::maximum(found, bad.to(found.device())) : bad;
    g.mul_(inv);
  }
  return found.defined() && found.item<float>() > 0;
}

bool DynamicLossScaler::unscale(const std::vector<at::Tensor>& params) const {
  return unscale_gradients(params, scale_);
}

void DynamicLossScaler::update(bool found_inf) {
  if (found_inf) {
    scale_ *= options_.backoff_factor;
    growth_tracker_ = 0;
    return;
  }
  if (++growth_tracker_ == options_.growth_interval) {
    scale_ *= options_.growth_factor;
    growth_tracker_ = 0;
  }
}

at::Tensor factored_grad(const at::Tensor& param, const at::Tensor& grad_factor) {
  auto g = param.grad();
  if (g.defined() && grad_factor.defined()) g.mul_(grad_factor.to(g.scalar_type()));
  return g;
}

}  // namespace lf::optim
