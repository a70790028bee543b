// GaLore as LLaMA-Factory 0.9.5 runs it (`use_galore: true`: galore-torch's GaLoreAdamW over
// projected_adamw.h's three groups): each target matrix's gradient is projected on a low-rank SVD basis of
// the gradient, refreshed every galore_update_interval steps (galore_proj_type's side), Adam's moments live
// in that space, and the update comes back through the basis times galore_scale.
#include <ATen/ATen.h>

#include "lf/common/error.h"
#include "projected_adamw.h"

namespace lf::optim {

namespace {

class Galore final : public ProjectedAdamW {
 public:
  explicit Galore(const OptimizerInputs& in)
      : ProjectedAdamW(in, in.options.galore.target, in.options.galore.layerwise, "GaLore"), o_(in.options.galore) {
    LF_CHECK(o_.rank > 0 && o_.update_interval > 0, ConfigError,
             "galore_rank {} and galore_update_interval {}: both must be > 0", o_.rank, o_.update_interval);
  }
  std::string_view name() const override { return "galore"; }

 private:
  std::unique_ptr<LowRankProjector> make_projector(const Slot&) const override {
    return std::make_unique<LowRankProjector>(LowRankProjector::Basis::kSvd, o_.rank, o_.update_interval, o_.scale,
                                              o_.proj_type);
  }

  void step_target(Slot& s, const at::Tensor& grad) override {
    const auto low = s.projector->project(grad, s.adam.step);  // the step count before this update
    double step_size = 0;
    const auto direction = legacy_adam_direction(s.adam, low, in_.beta1, in_.beta2, in_.eps, lr_, step_size);
    legacy_adam_apply(s.p.tensor, s.projector->project_back(direction), step_size, lr_, s.weight_decay);
  }

  GaloreOptions o_;
};

}  // namespace

std::unique_ptr<Optimizer> make_galore(const OptimizerInputs& in) { return std::make_unique<Galore>(in); }

}  // namespace lf::optim
