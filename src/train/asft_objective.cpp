// stage sft with `use_asft_loss`: LLaMA-Factory's ASFT (trainer_utils.py asft_loss_func; sft/trainer.py
// compute_loss). Per micro-batch:
//   L_k = (1/n_k) sum_t p(y_t) ce_t  +  asft_alpha (1/n_k) sum_t KL(q_t || p_t)
// n_k the micro-batch's target tokens, p the model's softmax, p(y_t) detached (DFT's term), q the softmax of the
// reference: LLaMA-Factory's create_ref_model, a frozen copy of the initial weights in the compute dtype (full and
// freeze tuning; LoRA is refused in config_rules.cpp, as LLaMA-Factory builds no reference for it). The reference
// here is that copy, loaded once beside the model and never sharded (one more model's weights on each rank).
// HF's Trainer with a compute_loss_func neither divides L_k by the accumulation steps nor passes
// num_items_in_batch: a step's gradient is the sum of its micro-batches' and the average over ranks (DDP's
// mean, DeepSpeed's with scale_wrt_gas off), its logged loss sum_k L_k averaged over ranks. So the step
// divisor is the world size.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "lf/common/error.h"
#include "lf/model/causal_lm.h"
#include "lf/model/initial_weights.h"
#include "lf/model/lm_head_asft.h"
#include "lf/model/loader.h"
#include "lf/model/loss.h"
#include "lf/parallel/strategy.h"
#include "lf/train/batch.h"
#include "batch_loss_step.h"
#include "objective.h"

namespace lf::train {
namespace {

// The frozen reference: the weights the model starts from, as LLaMA-Factory's load_model(is_trainable=False)
// gives them (the compute dtype, no upcast), on the model's device.
std::unique_ptr<model::CausalLM> load_reference(const config::JobPlan& c, const model::CausalLM& policy) {
  const auto dtype = policy.compute_dtype();
  const auto device = policy.lm_head_weight().device();
  model::LoadOptions lo;
  lo.device = device;
  lo.random_init = model::choose_initial_weights(c.model.model_name_or_path, c.model.init_weights, c.seed).random;
  lo.seed = static_cast<uint64_t>(c.seed);
  lo.param_dtype = dtype;
  auto ref = model::load_causal_lm(c.model.model_name_or_path, lo);
  ref->set_compute_dtype(dtype);
  ref->set_training(false);
  for (auto& p : ref->named_parameters()) p.tensor->requires_grad_(false);
  spdlog::info("ASFT: a frozen copy of the initial weights ({}, {}) as the KL anchor", c.model.model_name_or_path,
               c10::toString(dtype));
  return ref;
}

class AsftObjective : public Objective {
 public:
  explicit AsftObjective(const ObjectiveContext& ctx) : ctx_(ctx) {
    // The head's backward recomputes the logits from the weight it saved; ZeRO-3 has released a tied lm_head (the
    // embedding's unit) by then, and only an untied head is gathered again for its own unit's backward.
    LF_CHECK(ctx.strategy->unit_hooks() == nullptr || !ctx.model->config().tie_word_embeddings, ConfigError,
             "use_asft_loss under zero_stage 3 with tied word embeddings ({}) is not implemented: the loss's backward "
             "needs the embedding ZeRO-3 has released; use zero_stage 0, 1 or 2", ctx.plan->model.model_name_or_path);
    ref_ = load_reference(*ctx.plan, *ctx.model);
  }

  double step_divisor(const std::vector<std::vector<int64_t>>&) const override {
    return static_cast<double>(std::max<int64_t>(1, ctx_.strategy->world()));
  }

  MicroStep micro_step(const std::vector<int64_t>& examples, double factor, PhaseClock& phases) override {
    return batch_loss_micro_step(ctx_, examples, factor, phases, [this](const Batch& b) { return micro_batch_loss(b); });
  }

  void idle_micro_step() override {
    batch_loss_idle_micro_step(ctx_, [this](const Batch& b) { return micro_batch_loss(b); });
  }

 private:
  // The reference's final-norm rows at `flat` of the shifted positions: [M,C], no grad.
  at::Tensor reference_rows(const Batch& b, const at::Tensor& position_ids, const at::Tensor& flat) {
    c10::NoGradGuard no_grad;
    const auto device = ref_->lm_head_weight().device();
    const int64_t n = b.input_ids.size(0), t = b.input_ids.size(1);
    const auto normed = ref_->final_norm(ref_->hidden_states(b.input_ids.to(device), position_ids, nullptr, b.segment_ids));
    return normed.narrow(1, 0, t - 1).reshape({n * (t - 1), normed.size(2)}).index_select(0, flat.to(device));
  }

  // L_k of the batch: 0-dim fp32.
  at::Tensor micro_batch_loss(const Batch& b) {
    const auto t = batch_targets(ctx_, b);
    const auto ref_rows = t.flat.numel() > 0 ? reference_rows(b, t.position_ids, t.flat) : at::Tensor();
    return loss_at_targets(ctx_, b, t, [&](const at::Tensor& rows, const at::Tensor& w) {
      const int64_t chunk = ctx_.chunk_rows > 0 ? ctx_.chunk_rows : std::max<int64_t>(1, (int64_t{1} << 30) / (8 * w.size(0)));
      const auto per_row = model::chunked_lm_head_asft(rows, w, t.targets, ref_rows, ref_->lm_head_weight(),
                                                       ctx_.plan->objective.asft_alpha, chunk, ctx_.model->lm_head_grad_sink());
      return per_row.sum() / static_cast<double>(t.flat.numel());
    });
  }

  ObjectiveContext ctx_;
  std::unique_ptr<model::CausalLM> ref_;
};

}  // namespace

std::unique_ptr<Objective> make_asft_objective(const ObjectiveContext& ctx) {
  return std::make_unique<AsftObjective>(ctx);
}

}  // namespace lf::train
