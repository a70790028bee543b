// When a step's numbers come back to the host (trainer_state.h's PendingStep): at the step's end, before its
// update (fp16's scaler needs the overflow flag, several ranks sum their counters, LF_LATE_READBACK=0), or
// once the next step is launched, its update already launched with the clipping factor still on the device.
// Either way the same numbers reach the same logs in the same order; only when the host waits differs.
#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <cmath>

#include "lf/common/log.h"
#include "phase_profile.h"
#include "trainer_state.h"

namespace lf::train {

bool Trainer::State::late_readback(const PhaseClock& phases) const {
  return c.logging.late_readback && world == 1 && !stepper.fp16 && !phases.enabled();
}

void Trainer::State::read_step(PendingStep& p, const TrainPlan& plan, const LoopState& loop) {
  RECORD_USER_SCOPE("lf::read_step");  // LF_PROFILE_TRACE shows where it falls: after the next step's launch
  auto& rec = p.rec;
  std::vector<double> sums = {p.loss_sum.item<double>() / p.denom, static_cast<double>(rec.num_tokens),
                              static_cast<double>(rec.padded_tokens)};
  sums.insert(sums.end(), p.metric_sums.begin(), p.metric_sums.end());
  // HF's Trainer adds each micro-batch's coef x aux loss to its loss: after the objective's sums.
  const size_t aux_at = sums.size();
  if (p.aux_sum.defined()) sums.insert(sums.end(), {p.aux_sum.item<double>(), static_cast<double>(p.aux_batches)});
  if (world > 1) sums = strategy->all_reduce_sums(std::move(sums));
  const double step_loss = sums[0] + (p.aux_sum.defined() ? aux_coef * sums[aux_at] : 0.0);
  if (p.aux_sum.defined()) rec.has_aux_loss = true, rec.aux_loss = sums[aux_at] / std::max(1.0, sums[aux_at + 1]);
  rec.step_tokens = static_cast<int64_t>(sums[1]);
  rec.step_padded_tokens = static_cast<int64_t>(sums[2]);
  const size_t n = p.metric_sums.size();
  metrics_since_log.resize(n, 0.0);
  for (size_t i = 0; i < n; ++i) metrics_since_log[i] += sums[3 + i];
  last_step_metrics = json::object();
  objective->log_metrics(std::vector<double>(sums.begin() + 3, sums.begin() + 3 + static_cast<int64_t>(n)),
                         last_step_metrics);
  LF_CHECK(std::isfinite(step_loss), NonFiniteLossError,
           "the training loss is {} at step {} of {} (epoch {:.2f}, lr {:.3g}); lower learning_rate, check the data, or "
           "use bf16 instead of fp16",
           step_loss, rec.step, plan.total, loop.epoch, rec.lr);
  if (p.grad_norm.defined()) rec.grad_norm = p.grad_norm.item<double>();
  rec.loss = step_loss;
  p.read = true;
}

void Trainer::State::complete_step(PendingStep& p, const TrainPlan& plan, LoopState& loop, TrainSummary& sum,
                                   const ProgressDisplay& display) {
  if (!p.read) read_step(p, plan, loop);
  const auto& rec = p.rec;
  counts.tokens_seen += rec.step_tokens;
  counts.input_tokens_seen += rec.step_padded_tokens;
  counts.rank_tokens_seen += rec.num_tokens;
  // HF adds 6 x input_ids.numel() x params per micro-batch on each rank and sums the ranks:
  // counted from the step's integer total, so one process and N ranks give the same double.
  counts.flos += 6.0 * static_cast<double>(rec.step_padded_tokens) * static_cast<double>(non_embedding_params);
  sum.steps.push_back(rec);
  report_progress(rec);
  log_step(rec, plan, loop, display);
}

}  // namespace lf::train
