// stage rm: LLaMA-Factory 0.9.5's PairwiseTrainer. A micro-batch of B pairs is one forward of 2B rows
// (chosen rows, then rejected rows, as PairwiseDataCollatorWithPadding pads them); the value head
// (model/value_head.h) scores each row at its last real token (attention_mask.sum() - 1), and
//   loss = mean over the pairs of -logsigmoid(score_chosen - score_rejected)   (fp32)
// The LM head is not run: its logits are never part of the loss. No metric beyond the loss is logged
// while training (LLaMA-Factory's accuracy is an evaluation metric: eval_accuracy).
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>

#include "lf/model/causal_lm.h"
#include "lf/model/value_head.h"
#include "lf/parallel/strategy.h"
#include "phase_profile.h"
#include "sequence_logps.h"
#include "lf/model/host_copies.h"

namespace lf::train {
namespace {

class RmObjective : public Objective {
 public:
  explicit RmObjective(const ObjectiveContext& ctx) : ctx_(ctx) {}

  double step_divisor(const std::vector<std::vector<int64_t>>& micro_batches) const override {
    return static_cast<double>(micro_batches.size());
  }

  MicroStep micro_step(const std::vector<int64_t>& examples, double factor, PhaseClock& phases) override {
    const auto b = collate(*ctx_.train, both_rows(examples), ctx_.pad_id);
    MicroStep out;
    out.add_rows(b.num_tokens, b.input_ids.size(0), b.input_ids.size(1));
    const auto loss = pair_loss(b, static_cast<int64_t>(examples.size()), *ctx_.train, both_rows(examples), nullptr);
    phases.lap(Phase::kForward);
    torch::autograd::backward({loss * factor});
    phases.lap(Phase::kBackward);
    out.loss = loss.detach();
    return out;
  }

  void idle_micro_step() override {
    const auto b = no_target_batch(ctx_.pad_id);
    torch::autograd::backward({scores(b).sum() * 0});
  }

  std::vector<std::string> plot_keys() const override { return {"loss"}; }
  nlohmann::json evaluate() override;

 private:
  // Each row's value at every position: [N,T] fp32.
  at::Tensor scores(const Batch& b) {
    auto& m = *ctx_.model;
    auto* hooks = ctx_.strategy->unit_hooks();
    const auto x = m.hidden_states(model::to_device(b.input_ids, m.lm_head_weight().device()), {}, hooks);
    return model::run_unit(hooks, m.head_unit(), x, [&](const at::Tensor& h) {
      return ctx_.value_head->forward(m.final_norm(h), m.training());
    });
  }

  // The mean pairwise loss of `k` pairs in `b`; *correct (evaluation): pairs whose chosen scores higher.
  at::Tensor pair_loss(const Batch& b, int64_t k, const TokenizedDataset& data, const std::vector<int64_t>& rows,
                       double* correct) {
    const auto values = scores(b);  // [2k, T]
    std::vector<int64_t> last(rows.size());
    for (size_t i = 0; i < rows.size(); ++i)
      last[i] = static_cast<int64_t>(data.input_ids(static_cast<size_t>(rows[i])).size()) - 1;
    const auto idx = model::to_device(at::tensor(last, at::TensorOptions().dtype(at::kLong)), values.device()).unsqueeze(1);
    const auto s = values.gather(1, idx).squeeze(1);  // [2k]
    const auto chosen = s.narrow(0, 0, k), rejected = s.narrow(0, k, k);
    if (correct) *correct += (chosen > rejected).sum().item<double>();
    return -at::log_sigmoid(chosen.to(at::kFloat) - rejected.to(at::kFloat)).mean();
  }

  ObjectiveContext ctx_;
};

nlohmann::json RmObjective::evaluate() {
  const auto& eval = *ctx_.eval;
  auto& m = *ctx_.model;
  auto& strategy = *ctx_.strategy;
  c10::NoGradGuard no_grad;
  const bool was_training = m.training();
  m.set_training(false);
  const int64_t n = static_cast<int64_t>(eval.num_examples());
  const int64_t bs = std::max<int64_t>(1, ctx_.plan->eval.per_device_eval_batch_size);
  const int64_t world = strategy.world(), batches = (n + bs - 1) / bs;
  const int64_t rounds = strategy.needs_every_forward() ? (batches + world - 1) / world : 0;
  std::vector<double> sums(2, 0.0);  // loss sum over batches, correct pairs
  int64_t round = 0;
  for (int64_t k = strategy.rank(); k < batches; k += world, ++round) {
    std::vector<int64_t> ex;
    for (int64_t i = k * bs; i < std::min(n, (k + 1) * bs); ++i) ex.push_back(i);
    const auto rows = both_rows(ex);
    sums[0] += pair_loss(collate(eval, rows, ctx_.pad_id), static_cast<int64_t>(ex.size()), eval, rows, &sums[1])
                   .item<double>();
  }
  for (; round < rounds; ++round) (void)scores(no_target_batch(ctx_.pad_id));
  m.set_training(was_training);
  if (world > 1) sums = strategy.all_reduce_sums(std::move(sums));
  // HF's eval_loss: the mean of the batches' losses; ComputeAccuracy: the mean over the pairs.
  return {{"eval_loss", sums[0] / static_cast<double>(std::max<int64_t>(1, batches))},
          {"eval_accuracy", sums[1] / static_cast<double>(std::max<int64_t>(1, n))}};
}

}  // namespace

std::unique_ptr<Objective> make_rm_objective(const ObjectiveContext& ctx) {
  return std::make_unique<RmObjective>(ctx);
}

}  // namespace lf::train
