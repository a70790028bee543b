#pragma once
// The single-process training loop with HF Trainer's semantics (DESIGN "Training
// semantics"): epoch permutation from (seed, epoch), optimizer steps over global
// batches, loss = sum of target-token CEs of the step / the step's target-token count,
// AdamW with HF's decay groups, HF's lr schedules and warmup, global-norm clipping,
// fp16 dynamic loss scaling, per-layer activation checkpointing, evaluation, HF /
// LLaMA-Factory output files and checkpoint-N folders (written to a temp folder and
// renamed), from which a run resumes exactly (TrainerSetup::resume_from).
//
// The caller builds the model (dtype, LoRA), the datasets and the parallel strategy;
// run_training() (run_training.h) does that from a config. Not thread-safe; one device.
#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lf/common/error.h"
#include "lf/config/job_plan.h"
#include "lf/data/tokenized_dataset.h"
#include "lf/model/causal_lm.h"
#include "lf/model/lora.h"
#include "lf/optim/grad_utils.h"

namespace lf::parallel {
class ParallelStrategy;
}
namespace lf::model {
class ValueHead;
}
namespace lf::ckpt {
class CommitChannel;
}

namespace lf::train {

// The tokenizer as LLaMA-Factory's template fixed it (replace_eos, pad = eos when none), for the
// files saved beside the weights: HF's align_special_tokens gives config.json and
// generation_config.json these ids, and the saved tokenizer carries them and the chat template.
struct OutputTokenizer {
  std::optional<int32_t> bos_id;
  int32_t eos_id = -1, pad_id = -1;
  std::string eos_token, pad_token;
  // Written as chat_template.jinja (LLaMA-Factory's own template, or the tokenizer's kept).
  std::optional<std::string> chat_template;
};

struct TrainerSetup {
  config::JobPlan plan;
  model::CausalLM* model = nullptr;
  std::optional<model::LoraConfig> lora;  // set when the model carries LoRA weights (trains only them)
  model::ValueHead* value_head = nullptr;  // stage rm: trained beside the model, saved as value_head.safetensors
  const TokenizedDataset* train = nullptr;
  const TokenizedDataset* eval = nullptr;  // may be null or empty
  int32_t pad_id = 0;
  // Source folder for tokenizer/config files copied next to saved weights (may be empty).
  std::filesystem::path model_dir;
  // Unset: the tokenizer files are copied as they are (tests that build a TrainerSetup by hand).
  std::optional<OutputTokenizer> output_tokenizer;
  // A checkpoint-N folder written by this trainer: weights (or adapter), optimizer
  // moments, counters, log history and RNG states are restored, and training continues
  // at step N+1 with the same example order (the cursor is (epoch, step) from N).
  std::filesystem::path resume_from;
  bool write_outputs = true;  // false: train in memory only (tests)
  bool progress = true;       // progress bar / lines on stderr
  int64_t loss_chunk_rows = 0;  // lm_head_loss_sum's chunk (0: automatic)
  optim::LossScalerOptions loss_scaler;  // fp16 only (torch GradScaler defaults)
  // How the step is distributed (parallel/strategy.h): its rank and world are the trainer's.
  // Null: one process (the trainer makes a single-process strategy; world must be 1).
  // Borrowed; outlives the trainer.
  parallel::ParallelStrategy* strategy = nullptr;
  // How ranks report their checkpoint files durable to rank 0 (ckpt/rank_commit.h). Null:
  // world 1 (rank 0 is the only writer). Borrowed.
  ckpt::CommitChannel* commit = nullptr;
};

struct StepRecord {
  int64_t step = 0;       // 1-based global step
  double loss = 0;        // the step's loss (sum CE / target tokens)
  double lr = 0;          // the lr this step used
  double grad_norm = 0;   // before clipping (after unscaling under fp16)
  double epoch = 0;       // HF's fractional epoch after the step
  bool skipped = false;   // fp16 overflow: no update
  double loss_scale = 1;  // fp16: the scale used by this step
  int64_t num_targets = 0;
  int64_t num_tokens = 0;     // real tokens of this rank's micro-batches
  int64_t padded_tokens = 0;  // B x T summed over this rank's micro-batches (HF's numel)
  int64_t computed_tokens = 0;  // what the device ran of them: B x T, or the real tokens padding-free
  int64_t step_tokens = 0;         // real tokens of the whole step (every rank)
  int64_t step_padded_tokens = 0;  // B x T of the whole step (every rank)
  int64_t padded_token_positions = 0;  // each computed row's length squared, summed (attention FLOPs)
  double seconds = 0;         // wall time of the step (forward, backward, optimizer); read late: since the last read
  // Mixture of experts with the load-balancing loss on: its mean over the step's micro-batches (every
  // rank); `loss` holds router_aux_loss_coef x its sum, as HF's Trainer adds it per micro-batch.
  bool has_aux_loss = false;
  double aux_loss = 0;
  // LF_PROFILE_PHASES=1 only: forward, backward, DDP finish, optimizer seconds (else zeros).
  std::array<double, 4> phase_seconds{};
};

struct EvalRecord {
  int64_t step = 0;
  double eval_loss = 0;
};

struct TrainSummary {
  std::vector<StepRecord> steps;
  std::vector<EvalRecord> evals;
  int64_t global_step = 0;
  int64_t total_steps = 0;
  int64_t warmup_steps = 0;
  double train_loss = 0;  // mean of step losses (HF's train_loss)
  double runtime_s = 0;
  int64_t tokens_seen = 0;  // real tokens of every rank
  double epoch = 0;
  int64_t peak_memory_bytes = 0;  // CUDA caching allocator's peak; on CPU the process's peak RSS
  int64_t late_reads = 0;  // steps whose numbers were read after the next step's launch (LF_LATE_READBACK)
};

// NaN/inf training loss: stops the run; exit code kExitConfig (a learning rate or
// data problem that a restart would reproduce).
class NonFiniteLossError : public Error {
 public:
  explicit NonFiniteLossError(const std::string& what) : Error(what, kExitConfig) {}
};

// Total optimizer steps as HF computes them: max_steps when > 0, else
// ceil(num_train_epochs x ceil(n / global_batch)).
int64_t total_train_steps(const config::JobPlan& config, int64_t num_examples, int64_t world);

class Trainer {
 public:
  explicit Trainer(TrainerSetup setup);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  TrainSummary train();
  // Mean eval loss as HF's evaluate() reports it (per-batch token means weighted by batch size).
  double evaluate();
  // The adapter (LoRA) or the full model, plus tokenizer side files, into `dir`.
  void save_model(const std::filesystem::path& dir);

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace lf::train
