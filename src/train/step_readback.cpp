// When a step's numbers come back to the host (trainer_state.h's PendingStep): at the step's end, before its
// update (fp16's scaler needs the overflow flag, several ranks sum their counters, LF_LATE_READBACK=0), or
// once the next step is launched, its update already launched with the clipping factor still on the device.
// Either way the same numbers reach the same logs in the same order; only when the host waits differs.
#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "lf/common/log.h"
#include "phase_profile.h"
#include "trainer_state.h"

namespace lf::train {

bool Trainer::State::late_readback(const PhaseClock& phases) const {
  return c.logging.late_readback && world == 1 && !stepper.fp16 && !phases.enabled();
}

// The step's device values: from the staged copy when it was launched late (the step's seconds then the period
// since the last late read: when its GPU work was done, not when the host finished launching it), else read now.
StepValues Trainer::State::read_device_values(PendingStep& p) {
  StepValues out;
  if (p.staged.staged()) {
    const auto v = p.staged.read();
    const auto now = Clock::now();
    p.rec.seconds = std::chrono::duration<double>(now - std::max(p.started, stepper.last_late_read)).count();
    stepper.last_late_read = now;
    out.loss_sum = v[0], out.grad_norm = v[1], out.aux_sum = v[2];
    out.metric_sums.assign(v.begin() + 3, v.end());
    return out;
  }
  out.loss_sum = p.loss_sum.item<double>();
  if (p.grad_norm.defined()) out.grad_norm = p.grad_norm.item<double>();
  if (p.aux_sum.defined()) out.aux_sum = p.aux_sum.item<double>();
  if (p.metric_sums.defined()) {
    const auto host = p.metric_sums.to(at::kCPU).contiguous();
    out.metric_sums.assign(host.const_data_ptr<double>(), host.const_data_ptr<double>() + host.numel());
  }
  return out;
}

void Trainer::State::read_step(PendingStep& p, const TrainPlan& plan, const LoopState& loop) {
  RECORD_USER_SCOPE("lf::read_step");  // LF_PROFILE_TRACE shows where it falls: after the next step's launch
  auto& rec = p.rec;
  const auto v = read_device_values(p);
  std::vector<double> sums = {v.loss_sum / p.denom, static_cast<double>(rec.num_tokens),
                              static_cast<double>(rec.padded_tokens)};
  sums.insert(sums.end(), v.metric_sums.begin(), v.metric_sums.end());
  // HF's Trainer adds each micro-batch's coef x aux loss to its loss: after the objective's sums.
  const size_t aux_at = sums.size();
  if (p.aux_sum.defined()) sums.insert(sums.end(), {v.aux_sum, static_cast<double>(p.aux_batches)});
  if (world > 1) sums = strategy->all_reduce_sums(std::move(sums));
  const double step_loss = sums[0] + (p.aux_sum.defined() ? aux_coef * sums[aux_at] : 0.0);
  if (p.aux_sum.defined()) rec.has_aux_loss = true, rec.aux_loss = sums[aux_at] / std::max(1.0, sums[aux_at + 1]);
  rec.step_tokens = static_cast<int64_t>(sums[1]);
  rec.step_padded_tokens = static_cast<int64_t>(sums[2]);
  const size_t n = v.metric_sums.size();
  metrics_since_log.resize(n, 0.0);
  for (size_t i = 0; i < n; ++i) metrics_since_log[i] += sums[3 + i];
  last_step_metrics = json::object();
  objective->log_metrics(std::vector<double>(sums.begin() + 3, sums.begin() + 3 + static_cast<int64_t>(n)),
                         last_step_metrics);
  LF_CHECK(std::isfinite(step_loss), NonFiniteLossError,
           "the training loss is {} at step {} of {} (epoch {:.2f}, lr {:.3g}); lower learning_rate, check the data, or "
           "use bf16 instead of fp16",
           step_loss, rec.step, plan.total, loop.epoch, rec.lr);
  if (p.grad_norm.defined()) rec.grad_norm = v.grad_norm;
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
