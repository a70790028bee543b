// APOLLO as LLaMA-Factory 0.9.5 runs it (`use_apollo: true`: apollo-torch's APOLLOAdamW over
// projected_adamw.h's three groups): each target matrix's gradient is projected (apollo_proj: a random
// Gaussian basis seeded by the parameter's position in the groups, or an SVD one), Adam's moments live in that
// space, and their update only sets a scale of the raw gradient: per channel (the norm of the low-rank update
// over the norm of the low-rank gradient, along the projected side) or one per tensor. Fira's norm-growth
// limiter caps the scaled gradient's norm at 1.01 x the last one, and the update is that times
// sqrt(apollo_scale). apollo_scale_front has no effect: LLaMA-Factory passes it as a group key, and the
// optimizer reads only its constructor's argument.
#include <ATen/ATen.h>

#include <cmath>

#include "lf/common/error.h"
#include "projected_adamw.h"

namespace lf::optim {

namespace {

class Apollo final : public ProjectedAdamW {
 public:
  explicit Apollo(const OptimizerInputs& in)
      : ProjectedAdamW(in, in.options.apollo.target, in.options.apollo.layerwise, "APOLLO"), o_(in.options.apollo) {
    LF_CHECK(o_.rank > 0 && o_.update_interval > 0, ConfigError,
             "apollo_rank {} and apollo_update_interval {}: both must be > 0", o_.rank, o_.update_interval);
    for (const auto& s : slots_)
      if (s.target) check_channel_side(s);
  }
  std::string_view name() const override { return "apollo"; }

 private:
  // Channel scaling takes its norms along the matrix's shorter side (apollo-torch picks norm_dim by shape, not by
  // apollo_proj_type), so a forced side that projects the longer one gives rank factors for a [m, n] gradient:
  // left on m >= n ([rank, 1] against m rows), right on m < n ([rank] against n columns). apollo-torch stops
  // there with a size mismatch (LLaMA-Factory with it); refused before the first step instead.
  void check_channel_side(const Slot& s) const {
    if (o_.scale_type != "channel" || o_.rank == 1) return;
    const int64_t m = s.p.tensor.size(0), n = s.p.tensor.size(1);
    const bool bad = (o_.proj_type == "left" && m >= n && o_.rank != m) ||
                     (o_.proj_type == "right" && m < n && o_.rank != n);
    LF_CHECK(!bad, ConfigError,
             "apollo_proj_type: {} with apollo_scale_type: channel on {} [{}, {}]: the channel scale needs one "
             "factor per {} ({}), and a {} projection leaves {} (apollo-torch, and LLaMA-Factory with it, stops on "
             "that size mismatch): use apollo_proj_type: std, apollo_scale_type: tensor, or an apollo_target "
             "without such matrices",
             o_.proj_type, s.p.name, m, n, m < n ? "column" : "row", m < n ? n : m, o_.proj_type, o_.rank);
  }

  std::unique_ptr<LowRankProjector> make_projector(const Slot& s) const override {
    const auto basis = o_.proj == "svd" ? LowRankProjector::Basis::kSvd : LowRankProjector::Basis::kRandom;
    return std::make_unique<LowRankProjector>(basis, o_.rank, o_.update_interval, o_.scale, o_.proj_type, s.seed);
  }

  void step_target(Slot& s, const at::Tensor& grad) override {
    const int64_t norm_dim = grad.size(0) < grad.size(1) ? 0 : 1;  // the low-rank side
    const auto low = s.projector->project(grad, s.adam.step);
    double step_size = 0;
    const auto norm_grad = legacy_adam_direction(s.adam, low, in_.beta1, in_.beta2, in_.eps, lr_, step_size);
    at::Tensor factor;
    if (o_.scale_type == "channel") {
      const std::vector<int64_t> dim{norm_dim};
      factor = at::linalg_vector_norm(norm_grad, 2, dim) / (at::linalg_vector_norm(low, 2, dim) + 1e-8);
      if (norm_dim == 1) factor = factor.unsqueeze(1);
    } else {
      factor = at::linalg_vector_norm(norm_grad, 2) / (at::linalg_vector_norm(low, 2) + 1e-8);
    }
    auto scaled = grad * factor;
    if (s.scaled_grad_norm.defined()) {
      const auto norm = at::linalg_vector_norm(scaled, 2);
      const auto ratio = norm / (s.scaled_grad_norm + 1e-8);
      // Python's max(ratio, 1.01) / 1.01: 1.0 when ratio < 1.01 (compared in fp32, as torch does).
      if (at::lt(ratio, 1.01).item<bool>()) {
        s.scaled_grad_norm = norm;
      } else {
        const auto limiter = ratio / 1.01;
        scaled = scaled / limiter;
        s.scaled_grad_norm = norm / limiter;
      }
    } else {
      s.scaled_grad_norm = at::linalg_vector_norm(scaled, 2);
    }
    scaled.mul_(std::sqrt(o_.scale));
    legacy_adam_apply(s.p.tensor, scaled, step_size, lr_, s.weight_decay);
  }

  ApolloOptions o_;
};

}  // namespace

std::unique_ptr<Optimizer> make_apollo(const OptimizerInputs& in) { return std::make_unique<Apollo>(in); }

}  // namespace lf::optim
