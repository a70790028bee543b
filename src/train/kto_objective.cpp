// stage kto: LLaMA-Factory 0.9.5's CustomKTOTrainer over TRL 0.24's kto_loss. A micro-batch of B tagged
// examples is two forwards: the target rows (with gradients) and their KL rows (each example's prompt
// with another example's response, pairwise.h; no gradients), padded apart as KTODataCollatorWithPadding
// pads them. The reference log-probabilities of both were computed before step 1 (reference_logps.h).
//   kl        = max(0, mean over the micro-step's KL rows of (policy - reference))   [every rank's rows:
//               TRL gathers it across processes, so a rank's loss depends on the others' KL rows]
//   desirable   1 - sigmoid(beta ((p - r) - kl)) x kto_chosen_weight
//   undesirable 1 - sigmoid(beta (kl - (p - r))) x kto_rejected_weight
// the micro-batch's loss is their mean, plus pref_ftx x mean(-p / tokens over the desirable ones) x B /
// their count (LLaMA-Factory's rescaling). Metrics as LLaMA-Factory logs them: the sums of rewards,
// logps and logits per kind and their counts since the last log, reported as sum / count; kl summed
// over the micro-steps (counted once per micro-step: LLaMA-Factory keeps only the main process's).
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>

#include "lf/common/error.h"
#include "lf/common/log.h"
#include "lf/model/causal_lm.h"
#include "lf/parallel/strategy.h"
#include "phase_profile.h"
#include "reference_logps.h"
#include "reference_model.h"
#include "padding_free.h"
#include "sequence_logps.h"
#include "lf/model/host_copies.h"

namespace lf::train {
namespace {

enum Slot { kRewardsChosen, kLogpsChosen, kLogitsChosen, kCountChosen, kRewardsRejected, kLogpsRejected,
            kLogitsRejected, kCountRejected, kKl, kSlots };

class KtoObjective : public Objective {
 public:
  explicit KtoObjective(const ObjectiveContext& ctx) : ctx_(ctx), o_(ctx.plan->objective), sums_(kSlots, 0.0) {
    disable_dropout(*ctx.model);
    LF_CHECK(!ctx.eval || ctx.eval->size() == 0 || ctx.plan->eval.eval_strategy == "no", ConfigError,
             "evaluation under stage kto is not implemented yet: set eval_strategy: no (or remove val_size / "
             "eval_dataset)");
  }

  void prepare(const std::vector<std::vector<int64_t>>& first_epoch) override {
    spdlog::info("kto: reference log-probabilities of {} examples and their KL pairs on this rank ({} in the dataset; {}), computed once "
                 "before training",
                 examples_in(first_epoch), ctx_.train->num_examples(), !o_.ref_model.empty() ? "ref_model " + o_.ref_model
                                             : ctx_.lora ? "the model with its adapters off" : "the initial weights");
    const auto ref = separate_reference(ctx_);  // freed at the end of the pass
    ref_train_ = reference_logps(ctx_, *ctx_.train, first_epoch, /*pairwise=*/false, ref.get());
  }

  double step_divisor(const std::vector<std::vector<int64_t>>& micro_batches) const override {
    return static_cast<double>(micro_batches.size());
  }
  bool collective_micro_steps() const override { return ctx_.strategy->world() > 1; }

  MicroStep micro_step(const std::vector<int64_t>& examples, double factor, PhaseClock& phases) override;

  // The rounds of a rank without examples: the KL's all-reduce always, the forwards (target with its
  // backward, KL) only where the strategy's collectives live in them (ZeRO-3).
  void idle_micro_step() override {
    at::Tensor target;
    if (ctx_.strategy->needs_every_forward()) {
      target = sequence_logps(ctx_, no_target_batch(ctx_.pad_id)).logps;
      c10::NoGradGuard no_grad;
      (void)sequence_logps(ctx_, no_target_batch(ctx_.pad_id));
    }
    if (ctx_.strategy->world() > 1) (void)ctx_.strategy->all_reduce_sums({0.0, 0.0});
    if (target.defined()) torch::autograd::backward({target.sum() * 0});
  }

  at::Tensor take_metric_sums() override {
    auto out = at::tensor(sums_, at::TensorOptions().dtype(at::kDouble));
    std::fill(sums_.begin(), sums_.end(), 0.0);
    return out;
  }

  void log_metrics(const std::vector<double>& s, nlohmann::json& e) const override {
    if (s.size() != kSlots) return;
    if (s[kCountChosen] > 0) {
      e["rewards/chosen"] = s[kRewardsChosen] / s[kCountChosen];
      e["logps/chosen"] = s[kLogpsChosen] / s[kCountChosen];
      e["logits/chosen"] = s[kLogitsChosen] / s[kCountChosen];
    }
    if (s[kCountRejected] > 0) {
      e["rewards/rejected"] = s[kRewardsRejected] / s[kCountRejected];
      e["logps/rejected"] = s[kLogpsRejected] / s[kCountRejected];
      e["logits/rejected"] = s[kLogitsRejected] / s[kCountRejected];
    }
    if (e.contains("rewards/chosen") && e.contains("rewards/rejected"))
      e["rewards/margins"] = e["rewards/chosen"].get<double>() - e["rewards/rejected"].get<double>();
    e["kl"] = s[kKl];
  }

  std::vector<std::string> plot_keys() const override { return {"loss", "rewards/chosen"}; }

 private:
  ObjectiveContext ctx_;
  const config::ObjectiveSection& o_;
  std::vector<double> ref_train_;
  std::vector<double> sums_;
};

MicroStep KtoObjective::micro_step(const std::vector<int64_t>& examples, double factor, PhaseClock& phases) {
  const auto& data = *ctx_.train;
  const auto k = static_cast<int64_t>(examples.size());
  const auto tb = collate(data, pair_rows(examples, false), ctx_.pad_id);
  const auto kb = collate(data, pair_rows(examples, true), ctx_.pad_id);
  MicroStep out;
  out.add_ran(tb.num_tokens, tb.input_ids.size(0), tb.input_ids.size(1), ran_lengths(*ctx_.model, tb));
  out.add_ran(kb.num_tokens, kb.input_ids.size(0), kb.input_ids.size(1), ran_lengths(*ctx_.model, kb));
  const auto target = sequence_logps(ctx_, tb);
  at::Tensor kl_logps;
  {
    c10::NoGradGuard no_grad;
    kl_logps = sequence_logps(ctx_, kb).logps;
  }
  const auto device = target.logps.device();
  std::vector<double> ref_t(static_cast<size_t>(k)), ref_kl(static_cast<size_t>(k));
  std::vector<int64_t> chosen, rejected;
  for (int64_t i = 0; i < k; ++i) {
    const auto e = static_cast<size_t>(examples[static_cast<size_t>(i)]);
    ref_t[static_cast<size_t>(i)] = ref_train_[2 * e];
    ref_kl[static_cast<size_t>(i)] = ref_train_[2 * e + 1];
    (data.tag(e) ? chosen : rejected).push_back(i);
  }
  const auto as_tensor = [&](const auto& v, at::ScalarType t) {
    return model::to_device(at::tensor(v, at::TensorOptions().dtype(t)), device);
  };
  const auto ref = as_tensor(ref_t, at::kDouble).to(at::kFloat);
  // The micro-step's KL estimate: this rank's mean, averaged over the ranks (TRL's gather_for_metrics).
  double kl = (kl_logps - as_tensor(ref_kl, at::kDouble).to(at::kFloat)).mean().item<double>();
  if (ctx_.strategy->world() > 1) {
    const auto s = ctx_.strategy->all_reduce_sums({kl, 1.0});
    kl = s[0] / s[1];
  }
  kl = std::max(0.0, static_cast<double>(static_cast<float>(kl)));
  const double beta = o_.pref_beta;
  const auto ci = as_tensor(chosen, at::kLong), ri = as_tensor(rejected, at::kLong);
  const auto pc = target.logps.index_select(0, ci), pr = target.logps.index_select(0, ri);
  const auto chosen_ratio = pc - ref.index_select(0, ci), rejected_ratio = pr - ref.index_select(0, ri);
  const auto losses = at::cat({o_.kto_chosen_weight * (1 - at::sigmoid(beta * (chosen_ratio - kl))),
                               o_.kto_rejected_weight * (1 - at::sigmoid(beta * (kl - rejected_ratio)))});
  auto loss = at::nanmean(losses);
  if (o_.pref_ftx > 1e-6 && !chosen.empty()) {
    const auto avg = pc / target.valid.index_select(0, ci);
    loss = loss + o_.pref_ftx * at::nanmean(-avg) / static_cast<double>(chosen.size()) * static_cast<double>(k);
  }
  phases.lap(Phase::kForward);
  torch::autograd::backward({loss * factor});
  phases.lap(Phase::kBackward);
  // Metrics: [n, T, V] logits summed per kind (LLaMA-Factory's logits/*_sum).
  const auto stats = at::stack({(beta * chosen_ratio.detach()).sum().to(at::kDouble), pc.detach().sum().to(at::kDouble),
                                target.logits_sum.index_select(0, ci).sum(),
                                (beta * rejected_ratio.detach()).sum().to(at::kDouble), pr.detach().sum().to(at::kDouble),
                                target.logits_sum.index_select(0, ri).sum()})
                         .cpu();
  const double* p = stats.data_ptr<double>();
  if (!chosen.empty()) {
    sums_[kRewardsChosen] += p[0], sums_[kLogpsChosen] += p[1], sums_[kLogitsChosen] += p[2];
    sums_[kCountChosen] += static_cast<double>(chosen.size());
  }
  if (!rejected.empty()) {
    sums_[kRewardsRejected] += p[3], sums_[kLogpsRejected] += p[4], sums_[kLogitsRejected] += p[5];
    sums_[kCountRejected] += static_cast<double>(rejected.size());
  }
  if (ctx_.strategy->rank() == 0) sums_[kKl] += kl;
  out.loss = loss.detach();
  return out;
}

}  // namespace

std::unique_ptr<Objective> make_kto_objective(const ObjectiveContext& ctx) {
  return std::make_unique<KtoObjective>(ctx);
}

}  // namespace lf::train
