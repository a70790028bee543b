#pragma once
// What GaLore and APOLLO share, as LLaMA-Factory 0.9.5 builds them (_create_galore_optimizer,
// _create_apollo_optimizer): three groups in this order, non-target parameters without decay (biases: its
// _get_decay_parameter_names, lf_decays), non-target ones with decay, the target matrices (2-D weights of the
// target linear modules) with decay and a projector each; every parameter steps by the legacy AdamW
// (legacy_adamw.h), the targets through their projector (the subclass). Layer-wise (galore_layerwise,
// apollo_layerwise: LLaMA-Factory steps each parameter in backward with its own optimizer and scheduler) is
// refused by the plan (optimizer_keys.cpp): an end-of-step update without clipping (what `layerwise` does
// here) does not give LLaMA-Factory's losses (tests/fixtures/train/lf_optim's galore_layerwise run).
// Internal to lf_optim.
#include <memory>
#include <string>
#include <vector>

#include "legacy_adamw.h"
#include "low_rank_projector.h"
#include "lf/optim/optimizer.h"

namespace lf::optim {

class ProjectedAdamW : public Optimizer {
 public:
  void set_lr(double lr) override { lr_ = lr; }
  int64_t steps() const override { return steps_; }
  bool clips() const override { return !layerwise_; }
  void step(const at::Tensor& grad_factor) override;
  void zero_grad() override;
  std::vector<StateTensor> state() const override;
  void load_state(const StateRead& read, int64_t steps) override;

 protected:
  struct Slot {
    NamedTensor p;
    bool target = false;
    double weight_decay = 0;
    int64_t seed = 0;  // 1-based position in the groups' flat order (APOLLO's projector seed)
    LegacyAdamState adam;
    std::unique_ptr<LowRankProjector> projector;
    at::Tensor scaled_grad_norm;  // APOLLO's norm-growth limiter (undefined before its first step)
  };

  ProjectedAdamW(const OptimizerInputs& in, const std::vector<std::string>& targets, bool layerwise,
                 std::string_view what);
  virtual std::unique_ptr<LowRankProjector> make_projector(const Slot& s) const = 0;
  // One target's update from its (clipped) gradient `grad` [m, n].
  virtual void step_target(Slot& s, const at::Tensor& grad) = 0;

  OptimizerInputs in_;
  double lr_;
  int64_t steps_ = 0;
  bool layerwise_;
  std::vector<Slot> slots_;
};

}  // namespace lf::optim
