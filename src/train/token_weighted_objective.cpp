// stage sft with `use_dft_loss` or `use_eaft_loss`: LLaMA-Factory's token-weighted cross-entropies
// (trainer_utils.py dft_loss_func / eaft_loss_func). Each target token's cross-entropy is weighted by a
// detached factor, the step's sum divided by its target tokens as HF divides compute_loss_func's
// result by num_items_in_batch (so the step divisor is the LM objective's):
//   DFT   w = p(target) = exp(-ce)
//   EAFT  w = (H_top20 / 3) ^ eaft_alpha, H_top20 the entropy of the softmax over the 20 largest logits
// The head runs through chunked_lm_head_logps ([M] log-probabilities whose backward scales each row by its
// own upstream gradient, -w here); EAFT's weights take one more no-grad GEMM over the vocabulary per chunk.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>

#include "lf/common/error.h"
#include "lf/model/causal_lm.h"
#include "lf/model/lm_head_logps.h"
#include "lf/model/loss.h"
#include "lf/parallel/strategy.h"
#include "lf/train/batch.h"
#include "batch_loss_step.h"
#include "objective.h"

namespace lf::train {
namespace {

// EAFT's weight of each row: [M] fp32, no grad. rows [M,C], weight [V,C].
at::Tensor eaft_weights(const at::Tensor& rows, const at::Tensor& weight, int64_t chunk, double alpha) {
  c10::NoGradGuard no_grad;
  std::vector<at::Tensor> parts;
  const int64_t k = std::min<int64_t>(20, weight.size(0));
  const auto w = weight.to(rows.scalar_type());  // the head in the activations' dtype, as HF's lm_head computes
  for (int64_t b = 0; b < rows.size(0); b += chunk) {
    const auto logits = at::matmul(rows.narrow(0, b, std::min(chunk, rows.size(0) - b)), w.t()).to(at::kFloat);
    const auto top = std::get<0>(at::topk(logits, k, -1));                   // [m,20]
    const auto logp = top - at::logsumexp(top, {-1}, /*keepdim=*/true);     // log-softmax over the top 20
    const auto entropy = -(logp.exp() * logp).sum(-1);                     // [m]
    parts.push_back(at::pow(entropy / 3.0, alpha));
  }
  return parts.empty() ? at::zeros({0}, rows.options().dtype(at::kFloat)) : at::cat(parts);
}

class TokenWeightedObjective : public Objective {
 public:
  explicit TokenWeightedObjective(const ObjectiveContext& ctx) : ctx_(ctx) {
    // As ASFT's head (asft_objective.cpp): its backward recomputes the logits from the lm_head it saved, which
    // ZeRO-3 has released when it is the tied embedding's (the embedding's unit). A named refusal, not a crash.
    LF_CHECK(ctx.strategy->unit_hooks() == nullptr || !ctx.model->config().tie_word_embeddings, ConfigError,
             "use_dft_loss / use_eaft_loss under zero_stage 3 with tied word embeddings ({}) is not implemented: the "
             "loss's backward needs the embedding ZeRO-3 has released; use zero_stage 0, 1 or 2",
             ctx.plan->model.model_name_or_path);
  }

  double step_divisor(const std::vector<std::vector<int64_t>>& micro_batches) const override {
    int64_t items = 0;
    for (const auto& mb : micro_batches)
      for (auto i : mb) items += hf_num_items(*ctx_.train, i);
    return static_cast<double>(std::max<int64_t>(1, items));
  }

  MicroStep micro_step(const std::vector<int64_t>& examples, double factor, PhaseClock& phases) override {
    return batch_loss_micro_step(ctx_, examples, factor, phases, [this](const Batch& b) { return weighted_sum(b); });
  }

  void idle_micro_step() override {
    batch_loss_idle_micro_step(ctx_, [this](const Batch& b) { return weighted_sum(b); });
  }

 private:
  // The sum over the batch's target tokens of w * ce: 0-dim fp32.
  at::Tensor weighted_sum(const Batch& b) {
    const auto t = batch_targets(ctx_, b);
    return loss_at_targets(ctx_, b, t, [&](const at::Tensor& rows, const at::Tensor& w) {
      const int64_t chunk = ctx_.chunk_rows > 0 ? ctx_.chunk_rows : std::max<int64_t>(1, (int64_t{1} << 30) / (4 * w.size(0)));
      const auto logps = model::chunked_lm_head_logps(rows, w, t.targets, chunk, ctx_.model->lm_head_grad_sink());  // [M]
      const auto& o = ctx_.plan->objective;
      const auto weights = o.use_dft_loss ? logps.detach().exp() : eaft_weights(rows.detach(), w.detach(), chunk, o.eaft_alpha);
      return -(logps * weights).sum();
    });
  }

  ObjectiveContext ctx_;
};

}  // namespace

std::unique_ptr<Objective> make_token_weighted_objective(const ObjectiveContext& ctx) {
  return std::make_unique<TokenWeightedObjective>(ctx);
}

}  // namespace lf::train
