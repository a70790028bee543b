#include "batch_loss_step.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include "lf/model/causal_lm.h"
#include "lf/model/loss.h"
#include "lf/parallel/strategy.h"

#include "phase_profile.h"
#include "lf/model/host_copies.h"

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

BatchTargets batch_targets(const ObjectiveContext& ctx, const Batch& b) {
  const auto device = ctx.model->lm_head_weight().device();
  const int64_t t = b.input_ids.size(1);
  const auto shifted = b.labels.narrow(1, 1, t - 1).reshape({-1});  // [N*(T-1)]
  BatchTargets out;
  out.flat = at::nonzero(shifted != model::kIgnoreIndex).squeeze(1);  // [M]
  out.targets = model::to_device(shifted.index_select(0, out.flat), device);
  out.position_ids = model::to_device(b.position_ids, device);
  return out;
}

at::Tensor loss_at_targets(const ObjectiveContext& ctx, const Batch& b, const BatchTargets& t, const RowsLoss& loss) {
  auto& m = *ctx.model;
  auto* hooks = ctx.strategy->unit_hooks();
  const auto device = m.lm_head_weight().device();
  const int64_t n = b.input_ids.size(0), len = b.input_ids.size(1);
  const auto x = m.hidden_states(model::to_device(b.input_ids, device), t.position_ids, hooks, b.segment_ids);  // [N,T,C]
  return model::run_unit(hooks, m.head_unit(), x, [&](const at::Tensor& h) {
    const auto normed = m.final_norm(h);
    if (t.flat.numel() == 0) return (normed.sum() * 0).to(at::kFloat);
    const int64_t c = normed.size(2);
    const auto rows = normed.narrow(1, 0, len - 1).reshape({n * (len - 1), c}).index_select(0, model::to_device(t.flat, device));
    return loss(rows, m.lm_head_weight());
  });
}

}  // namespace lf::train
