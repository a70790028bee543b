// stage dpo: LLaMA-Factory 0.9.5's CustomDPOTrainer over TRL 0.24's dpo_loss. A micro-batch of B pairs
// is one forward of 2B rows (every chosen row, then every rejected row, padded together as
// PairwiseDataCollatorWithPadding pads them); the reference log-probabilities were computed before
// step 1 (reference_logps.h). Per pair, with logps summed over the response (averaged over its tokens
// for ipo, orpo and simpo, the reference's too):
//   sigmoid  -logsigmoid(beta z)(1 - ls) - logsigmoid(-beta z) ls,   z = (pc - pr) - (rc - rr)
//   hinge    relu(1 - beta z)
//   ipo      (z - 1 / (2 beta))^2
//   orpo     -pc - beta logsigmoid((pc - pr) - (log1p(-e^pc) - log1p(-e^pr)))   (no reference)
//   simpo    -logsigmoid(beta ((pc - pr) - gamma / beta))                        (no reference)
// plus pref_ftx x (-pc / response tokens) (-pc for the averaged losses); the micro-batch's loss is the
// mean over its pairs. Rewards: beta (p - r) with a reference, beta p without. Metrics as TRL logs them:
// each micro-batch's means, averaged over the micro-batches since the last log (every rank's).
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>

#include <utility>

#include "lf/common/log.h"
#include "lf/model/causal_lm.h"
#include "lf/parallel/strategy.h"
#include "phase_profile.h"
#include "bco_baseline.h"
#include "reference_logps.h"
#include "reference_model.h"
#include "padding_free.h"
#include "sequence_logps.h"
#include "lf/model/host_copies.h"

namespace lf::train {
namespace {

// The metric sums' slots (each a sum of per-micro-batch means; kCount the micro-batches).
enum Slot { kRewardsChosen, kRewardsRejected, kAccuracies, kMargins, kLogpsChosen, kLogpsRejected, kLogitsChosen,
            kLogitsRejected, kSftLoss, kOddsRatioLoss, kCount, kSlots };

class DpoObjective : public Objective {
 public:
  explicit DpoObjective(const ObjectiveContext& ctx) : ctx_(ctx), o_(ctx.plan->objective) {
    disable_dropout(*ctx.model);
    averaged_ = o_.pref_loss == "ipo" || o_.pref_loss == "orpo" || o_.pref_loss == "simpo";
    if (o_.uses_reference() && o_.pref_bco_weight > 1e-6) bco_ = BcoBaseline(*ctx.strategy);
  }

  void prepare(const std::vector<std::vector<int64_t>>& first_epoch) override {
    if (!o_.uses_reference()) return;
    spdlog::info("dpo: reference log-probabilities of {} pairs on this rank ({} in the dataset; {}), computed once before training",
                 examples_in(first_epoch), ctx_.train->num_examples(), !o_.ref_model.empty() ? "ref_model " + o_.ref_model
                                             : ctx_.lora ? "the model with its adapters off" : "the initial weights");
    const auto ref = separate_reference(ctx_);  // freed at the end of the pass
    ref_train_ = reference_logps(ctx_, *ctx_.train, first_epoch, /*pairwise=*/true, ref.get());
    if (ctx_.eval && ctx_.eval->size() > 0)
      ref_eval_ = reference_logps(ctx_, *ctx_.eval, eval_batches(), true, ref.get());
  }

  double step_divisor(const std::vector<std::vector<int64_t>>& micro_batches) const override {
    return static_cast<double>(micro_batches.size());
  }

  MicroStep micro_step(const std::vector<int64_t>& examples, double factor, PhaseClock& phases) override {
    const auto b = collate(*ctx_.train, both_rows(examples), ctx_.pad_id);
    MicroStep out;
    out.add_ran(b.num_tokens, b.input_ids.size(0), b.input_ids.size(1), ran_lengths(*ctx_.model, b));
    const auto r = pair_loss(b, ref_train_, examples, /*record=*/true);
    phases.lap(Phase::kForward);
    torch::autograd::backward({r * factor});
    phases.lap(Phase::kBackward);
    out.loss = r.detach();
    return out;
  }

  // BCO's baseline is one all-reduce per micro-step over the ranks (TRL's get_global_statistics).
  bool collective_micro_steps() const override { return bco_ && ctx_.strategy->world() > 1; }

  // A rank without examples: the forward where the strategy's collectives live in it (ZeRO-3), BCO's
  // all-reduce in its place (after the forward, before the backward, as a micro-step holds them).
  void idle_micro_step() override {
    at::Tensor logps;
    if (ctx_.strategy->needs_every_forward()) logps = sequence_logps(ctx_, no_target_batch(ctx_.pad_id)).logps;
    if (bco_) (void)bco_.baseline(0.0, false);
    if (logps.defined()) torch::autograd::backward({logps.sum() * 0});
  }

  at::Tensor take_metric_sums() override {  // zeros on a rank without micro-batches: every rank's all-reduce alike
    return sums_.defined() ? std::exchange(sums_, at::Tensor()) : at::zeros({kSlots}, at::kDouble);
  }

  void log_metrics(const std::vector<double>& s, nlohmann::json& e) const override {
    if (s.size() != kSlots || s[kCount] <= 0) return;
    const double n = s[kCount];
    e["rewards/chosen"] = s[kRewardsChosen] / n;
    e["rewards/rejected"] = s[kRewardsRejected] / n;
    e["rewards/accuracies"] = s[kAccuracies] / n;
    e["rewards/margins"] = s[kMargins] / n;
    e["logps/chosen"] = s[kLogpsChosen] / n;
    e["logps/rejected"] = s[kLogpsRejected] / n;
    e["logits/chosen"] = s[kLogitsChosen] / n;
    e["logits/rejected"] = s[kLogitsRejected] / n;
    if (o_.pref_loss == "orpo") {
      e["sft_loss"] = s[kSftLoss] / n;
      e["odds_ratio_loss"] = s[kOddsRatioLoss] / n;
    }
  }

  std::vector<std::string> plot_keys() const override { return {"loss", "rewards/accuracies"}; }

  std::vector<std::vector<int64_t>> eval_batches() const {
    return strided_batches(static_cast<int64_t>(ctx_.eval->num_examples()), ctx_.plan->eval.per_device_eval_batch_size,
                           ctx_.strategy->rank(), ctx_.strategy->world());
  }

  nlohmann::json evaluate() override;

 private:
  // The mean loss of the pairs `examples` whose rows `b` holds; record: add the metrics to sums_ (on the
  // device), or to *into on the host (evaluation).
  at::Tensor pair_loss(const Batch& b, const std::vector<double>& ref, const std::vector<int64_t>& examples,
                       bool record, std::vector<double>* into = nullptr);

  ObjectiveContext ctx_;
  const config::ObjectiveSection& o_;
  bool averaged_ = false;
  BcoBaseline bco_;
  std::vector<double> ref_train_, ref_eval_;  // per row (reference_logps.h)
  at::Tensor sums_;  // fp64 [kSlots] on the device (undefined: none since the last take)
};

at::Tensor DpoObjective::pair_loss(const Batch& b, const std::vector<double>& ref,
                                   const std::vector<int64_t>& examples, bool record, std::vector<double>* into) {
  LogpsOptions options;
  options.ld_alpha = o_.ld_alpha;
  const auto s = sequence_logps(ctx_, b, options);
  const auto k = static_cast<int64_t>(examples.size());
  const double beta = o_.pref_beta;
  auto logps = averaged_ ? s.logps / s.valid : s.logps;  // [2B]
  const auto pc = logps.narrow(0, 0, k), pr = logps.narrow(0, k, k);
  at::Tensor losses, chosen_rewards, rejected_rewards;
  if (o_.uses_reference()) {
    std::vector<double> host(static_cast<size_t>(2 * k));
    for (int64_t i = 0; i < k; ++i) {
      host[static_cast<size_t>(i)] = ref[static_cast<size_t>(2 * examples[static_cast<size_t>(i)])];
      host[static_cast<size_t>(k + i)] = ref[static_cast<size_t>(2 * examples[static_cast<size_t>(i)] + 1)];
    }
    auto r = model::to_device(at::tensor(host, at::TensorOptions().dtype(at::kDouble)).to(at::kFloat), logps.device());
    if (averaged_) r = r / s.valid;
    const auto rc = r.narrow(0, 0, k), rr = r.narrow(0, k, k);
    const auto z = (pc - pr) - (rc - rr);
    if (o_.pref_loss == "sigmoid") {
      const double ls = o_.dpo_label_smoothing;
      losses = -at::log_sigmoid(beta * z) * (1 - ls) - at::log_sigmoid(-beta * z) * ls;
    } else if (o_.pref_loss == "hinge") {
      losses = at::relu(1 - beta * z);
    } else {  // ipo
      losses = at::pow(z - 1 / (2 * beta), 2);
    }
    chosen_rewards = beta * (pc - rc).detach();
    rejected_rewards = beta * (pr - rr).detach();
    if (bco_) {  // LLaMA-Factory's bco_loss: the baseline after this micro-batch's update, then re-weighted
      const double w = o_.pref_bco_weight;
      const double delta = bco_.baseline(at::cat({chosen_rewards, rejected_rewards}).mean().item<double>(), true);
      const auto bco = -at::log_sigmoid(beta * (pc - rc) - delta) - at::log_sigmoid(-(beta * (pr - rr) - delta));
      losses = (losses + bco * w) / (1.0 + w);
    }
  } else {
    if (o_.pref_loss == "orpo") {
      const auto log_odds = (pc - pr) - (at::log1p(-at::exp(pc)) - at::log1p(-at::exp(pr)));
      losses = -pc + beta * -at::log_sigmoid(log_odds);
    } else {  // simpo
      losses = -at::log_sigmoid(beta * ((pc - pr) - o_.simpo_gamma / beta));
    }
    chosen_rewards = beta * pc.detach();
    rejected_rewards = beta * pr.detach();
  }
  // LLaMA-Factory's chosen_logps_avg: the averaged losses' logps are averages already.
  const auto sft_loss = -(averaged_ ? pc : pc / s.valid.narrow(0, 0, k));
  if (o_.pref_ftx > 1e-6) losses = losses + o_.pref_ftx * sft_loss;
  if (record || into) {
    // A half's logits: [B, T, V] elements padded, its rows' real positions times V padding-free.
    const auto logits_of = [&](int64_t first) {
      int64_t positions = 0;
      for (int64_t i = first; i < first + k; ++i) positions += s.positions[static_cast<size_t>(i)];
      return s.logits_sum.narrow(0, first, k).sum() / static_cast<double>(positions * s.vocab);
    };
    const auto stats = at::stack({chosen_rewards.mean().to(at::kDouble), rejected_rewards.mean().to(at::kDouble),
                                  (chosen_rewards > rejected_rewards).to(at::kFloat).mean().to(at::kDouble),
                                  (chosen_rewards - rejected_rewards).mean().to(at::kDouble),
                                  pc.detach().mean().to(at::kDouble), pr.detach().mean().to(at::kDouble),
                                  logits_of(0), logits_of(k),
                                  sft_loss.detach().mean().to(at::kDouble),
                                  ((losses.detach() - sft_loss.detach()) / beta).mean().to(at::kDouble),
                                  at::ones({}, losses.options().dtype(at::kDouble))});  // kCount: one micro-batch
    if (into) {
      const auto host = stats.cpu();
      const double* p = host.const_data_ptr<double>();
      for (int i = 0; i < kSlots; ++i) (*into)[static_cast<size_t>(i)] += p[i];
    } else {
      sums_ = sums_.defined() ? sums_ + stats : at::zeros_like(stats) + stats;  // (0 + a) + b: the host's order
    }
  }
  return losses.mean();
}

nlohmann::json DpoObjective::evaluate() {
  const auto& eval = *ctx_.eval;
  auto& m = *ctx_.model;
  auto& strategy = *ctx_.strategy;
  c10::NoGradGuard no_grad;
  const bool was_training = m.training();
  m.set_training(false);
  const int64_t n = static_cast<int64_t>(eval.num_examples());
  const int64_t bs = std::max<int64_t>(1, ctx_.plan->eval.per_device_eval_batch_size), batches = (n + bs - 1) / bs;
  std::vector<double> sums(kSlots + 1, 0.0);  // + the loss
  for (const auto& ex : eval_batches()) {
    if (!ex.empty())
      sums[kSlots] += pair_loss(collate(eval, both_rows(ex), ctx_.pad_id), ref_eval_, ex, false, &sums).item<double>();
    else {
      if (strategy.needs_every_forward()) (void)sequence_logps(ctx_, no_target_batch(ctx_.pad_id));
      if (bco_) (void)bco_.baseline(0.0, false);  // LLaMA-Factory's evaluation updates the baseline too
    }
  }
  m.set_training(was_training);
  if (strategy.world() > 1) sums = strategy.all_reduce_sums(std::move(sums));
  nlohmann::json e = nlohmann::json::object();
  log_metrics(std::vector<double>(sums.begin(), sums.begin() + kSlots), e);
  nlohmann::json out = {{"eval_loss", sums[kSlots] / static_cast<double>(std::max<int64_t>(1, batches))}};
  for (auto& [key, v] : e.items()) out["eval_" + key] = v;
  return out;
}

}  // namespace

std::unique_ptr<Objective> make_dpo_objective(const ObjectiveContext& ctx) {
  return std::make_unique<DpoObjective>(ctx);
}

}  // namespace lf::train
