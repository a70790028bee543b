#include "batch_loss_step.h"

#include <torch/csrc/autograd/autograd.h>

#include "phase_profile.h"

namespace lf::train {

MicroStep batch_loss_micro_step(const ObjectiveContext& ctx, const std::vector<int64_t>& examples, double factor,
                                PhaseClock& phases, const BatchLoss& loss) {
  const auto b = collate(*ctx.train, examples, ctx.pad_id);
  MicroStep out;
  out.add_rows(b.num_tokens, b.input_ids.size(0), b.input_ids.size(1));
  const auto l = loss(b);
  phases.lap(Phase::kForward);
  torch::autograd::backward({l * factor});
  phases.lap(Phase::kBackward);
  out.loss = l.detach();
  return out;
}

void batch_loss_idle_micro_step(const ObjectiveContext& ctx, const BatchLoss& loss) {
  const auto l = loss(no_target_batch(ctx.pad_id));
  if (l.requires_grad()) torch::autograd::backward({l});
}

}  // namespace lf::train
