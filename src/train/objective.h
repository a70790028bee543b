#pragma once
// DESIGN "Objective per stage": how examples become micro-batches and a micro-batch becomes a loss and
// the metrics it logs. The step loop (train_step.cpp), the strategies and the checkpoints do not
// depend on the stage: run_step asks the objective for the step's divisor, runs its micro-steps, adds
// its metric sums to the step's one all-reduce, and log_step asks it for the log entries.
//
//   sft, pt   lm_objective.cpp    sum of target-token CEs / the step's target tokens (HF's rule)
//   dpo       dpo_objective.cpp   TRL/LLaMA-Factory's preference losses over pairs, reference
//                                 log-probabilities computed once before step 1 (reference_logps.h)
//   kto       kto_objective.cpp   KTO over tagged examples with the mismatched-pair KL estimate
//   rm        rm_objective.cpp    a value head's pairwise loss (value_head.h)
// A new stage is one file and one line in make_objective (objective_registry.cpp).
//
// Losses of the preference stages follow HF Trainer with model_accepts_loss_kwargs = False: each
// micro-batch's loss is the mean over its examples, the step's loss the mean over the step's
// micro-batches (every rank's): divisor = their count. Internal to lf_train; one training thread.
#include <ATen/core/Tensor.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lf/config/job_plan.h"
#include "lf/data/tokenized_dataset.h"

namespace lf::model {
class CausalLM;
class ValueHead;
}
namespace lf::parallel {
class ParallelStrategy;
}

namespace lf::train {

class PhaseClock;

// What an objective reads of the trainer; borrowed, outlives the objective.
struct ObjectiveContext {
  model::CausalLM* model = nullptr;
  parallel::ParallelStrategy* strategy = nullptr;
  const TokenizedDataset* train = nullptr;
  const TokenizedDataset* eval = nullptr;  // may be null
  const config::JobPlan* plan = nullptr;
  int32_t pad_id = 0;
  int64_t chunk_rows = 0;  // the LM head's row chunk (0: automatic)
  bool lora = false;
  model::ValueHead* value_head = nullptr;  // stage rm
};

// What one micro-step gives the step: its loss and the sizes of what it computed.
struct MicroStep {
  at::Tensor loss;        // 0-dim on the device, unscaled (the step's loss: the sum / the divisor)
  int64_t tokens = 0;     // real tokens of its rows
  int64_t padded = 0;     // rows x length, summed over its forwards (HF's numel: input_tokens_seen, flos)
  int64_t computed = 0;   // the tokens the device ran: padded, or fewer padding-free (train/padding_free.h)
  int64_t positions = 0;  // each computed row's length squared (attention FLOPs)
  void add_rows(int64_t real, int64_t rows, int64_t length) {
    tokens += real;
    padded += rows * length;
    computed += rows * length;
    positions += rows * length * length;
  }
  // Rows [rows, length] of which row r ran ran[r] positions (padding_free.h's ran_lengths).
  void add_ran(int64_t real, int64_t rows, int64_t length, const std::vector<int64_t>& ran) {
    tokens += real;
    padded += rows * length;
    for (const auto l : ran) computed += l, positions += l * l;
  }
};

class Objective {
 public:
  virtual ~Objective() = default;

  // Before step 1, on every rank (collectives allowed): the reference log-probabilities, say.
  // `first_epoch`: this rank's micro-batches of the first epoch, every step's in order, an empty one
  // where this rank has none (the same count on every rank).
  virtual void prepare(const std::vector<std::vector<int64_t>>& first_epoch) {}
  // The step's loss divisor, from every rank's micro-batches of the step (example indices; the
  // empty ones dropped), known before any backward.
  virtual double step_divisor(const std::vector<std::vector<int64_t>>& micro_batches) const = 0;
  // Forward and backward of this rank's micro-batch `examples`, its loss scaled by `factor` for the
  // backward.
  virtual MicroStep micro_step(const std::vector<int64_t>& examples, double factor, PhaseClock& phases) = 0;
  // The micro-step of a rank with no example left whose strategy needs every forward, or whose
  // objective holds collectives in its micro-steps (KTO's KL).
  virtual void idle_micro_step() = 0;
  // Whether a rank without examples must still run idle_micro_step (besides the strategy's needs).
  virtual bool collective_micro_steps() const { return false; }

  // This rank's metric sums since the last call, fp64 [n] on the device or the host (undefined: none), read
  // with the step's loss (appended to its all-reduce, then summed across steps until logged); n is fixed per
  // objective. Kept on the device, they cost the micro-steps no wait for the GPU.
  virtual at::Tensor take_metric_sums() { return {}; }
  // The log entries of LLaMA-Factory's trainer (TRL's reward metrics) from those sums, every rank's.
  virtual void log_metrics(const std::vector<double>& sums, nlohmann::json& entry) const {}
  // The keys plot_loss draws (LLaMA-Factory's workflow of the stage), besides eval_*.
  virtual std::vector<std::string> plot_keys() const { return {"loss"}; }

  // Evaluation on ctx.eval: eval_loss and the stage's eval_ metrics; null: the trainer's own (LM loss).
  virtual nlohmann::json evaluate() { return nullptr; }
};

// The objective of the plan's stage (objective_registry.cpp). `lm` makes sft's and pt's (it needs the
// trainer's own state: lm_objective.cpp).
std::unique_ptr<Objective> make_preference_objective(const ObjectiveContext& ctx);

}  // namespace lf::train
