#pragma once
// Trainer's internal state and the parts of the loop, each in a file of its own:
//   trainer.cpp        construction, the loop (train), evaluate
//   train_step.cpp     one optimizer step: micro-steps, backward, the strategy's events; the
//                      micro-step's CUDA graph (step_graph.h) where it applies
//   train_log.cpp      trainer_log.jsonl / log_history lines and the progress display
//   trainer_save.cpp   model outputs, checkpoints (per-rank commit), resume
//   final_outputs.cpp  the perf line and the files written when training ends
// Internal to lf_train. Not thread-safe.
#include <ATen/ATen.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "lf/model/host_copies.h"
#include "lf/optim/grad_utils.h"
#include "lf/optim/lr_schedule.h"
#include "lf/parallel/strategy.h"
#include "lf/train/batch.h"
#include "lf/train/data_order.h"
#include "lf/tfevents/scalar_log.h"
#include "lf/train/trainer.h"
#include "lf/train/model_flops.h"
#include "objective.h"
#include "outputs.h"
#include "step_graph.h"

namespace lf::train {

class PhaseClock;

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;
using TensorList = std::vector<std::pair<std::string, at::Tensor>>;  // named tensors, as saved

inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// HF's `logging_steps` / `eval_steps` / `save_steps`: < 1 is a fraction of the total.
inline int64_t resolve_interval(double v, int64_t total) {
  if (v <= 0) return 0;
  if (v < 1) return static_cast<int64_t>(std::ceil(static_cast<double>(total) * v));
  return static_cast<int64_t>(v);
}

inline double round_to(double v, int digits) {
  const double p = std::pow(10.0, digits);
  return std::round(v * p) / p;
}

// What the run's shape fixes before step 1: sizes, totals and the intervals.
struct TrainPlan {
  int64_t num_examples = 0;
  StepLayout layout;
  int64_t steps_per_epoch = 1;
  int64_t micro_per_epoch = 1;  // HF's steps_in_epoch: micro-batches per epoch (the fractional epoch)
  int64_t total = 0;
  int64_t log_every = 0, eval_every = 0, save_every = 0;
  bool eval_on = false;
  bool outputs = false;  // this rank writes output_dir (rank 0 with write_outputs)
};

// The loop's counters: what a checkpoint's "loop" section restores.
struct LoopState {
  int64_t global_step = 0;
  double epoch = 0;
  double loss_since_log = 0, total_loss = 0;
  int64_t last_logged = 0;
  json loop_json() const {
    return {{"loss_since_log", loss_since_log}, {"total_loss", total_loss}, {"last_logged", last_logged}};
  }
};

// The progress bar on a TTY (it owns the last line: cleared before any log line), plain
// log lines otherwise; rank 0 only.
class ProgressDisplay {
 public:
  explicit ProgressDisplay(bool enabled);
  bool tty() const { return tty_; }
  bool lines() const { return enabled_ && !tty_; }
  void clear() const;
  void bar(int64_t step, int64_t total, double loss, double lr, double tokens_per_s, const std::string& eta) const;

 private:
  bool enabled_ = false, tty_ = false;
};

// The step's own state (train_step.cpp): the schedule's counter, fp16's loss scaler, the CUDA
// graphs of the micro-step and the rows' padding they ask for. A checkpoint restores the
// counter and the scaler.
struct StepState {
  optim::LrSchedule sched;
  optim::DynamicLossScaler scaler;
  bool fp16 = false;
  int64_t sched_step = 0;  // HF's LambdaLR counter: advances only on steps that updated
  std::unique_ptr<MicroStepGraph> graph;  // CUDA graphs of the micro-step (step_graph.h), or none
  int64_t pad_multiple = kPadToMultipleOf;  // the rows' padding: graph_bucket_width() under graphs
  int64_t late_reads = 0;  // steps read after the next one was launched (step_readback.cpp; the perf line)
  Clock::time_point last_late_read;  // when the last step read late was (its successor's seconds count from it)
};

// A launched step whose device values are read on the host later (step_readback.cpp): the loss sum of its
// micro-steps, the load-balancing loss's, the gradient norm. Why: reading them at the step's end leaves the
// GPU idle while the host logs, collates the next batch and launches its first kernels (the 30B-A3B trace:
// 30 ms a step); read once the next step is launched, the GPU has that step's work queued. `read` false:
// the optimizer step was launched with the norm still on the device, and `staged` holds the loss sum, the
// norm and the load-balancing sum queued for the host before it: reading them waits for this step's
// backward and clipping only, not for the work launched after (a tensor's .item() would wait for all of it).
// What read_step reads of a PendingStep's device tensors.
struct StepValues {
  double loss_sum = 0, grad_norm = 0, aux_sum = 0;
  std::vector<double> metric_sums;
};

struct PendingStep {
  StepRecord rec;           // the host's fields: tokens, lr, step, epoch, seconds
  at::Tensor loss_sum;      // [] fp64: the micro-steps' loss sums (÷ denom once read)
  at::Tensor aux_sum;       // [] fp64, the load-balancing losses' sum (undefined: off)
  int64_t aux_batches = 0;
  at::Tensor metric_sums;   // the objective's, fp64 [n] (objective.h; undefined: none)
  at::Tensor grad_norm;     // [] on the device until read
  model::HostScalars staged;  // late: [loss sum, grad norm, aux sum, metric sums] on their way to the host
  Clock::time_point started;  // run_step's start (a late step's seconds: from here or the last late read)
  double denom = 1;
  bool read = false;
};

// Counters of the whole job (run_epoch adds each step's, every rank's micro-batches summed with
// the step's loss; a checkpoint restores them; the logs and the final outputs read them).
struct JobCounters {
  int64_t tokens_seen = 0;        // real (non-padding) tokens
  int64_t input_tokens_seen = 0;  // input_ids elements, padding included (HF's "all")
  double flos = 0;                // HF's total_flos: 6 x input_ids elements x non-embedding parameters
  int64_t rank_tokens_seen = 0;   // this rank's real tokens: the perf line's per-device speed
  // Where this process started (a resumed run): speeds and ETAs count only its own work.
  int64_t first_step = 0;
  int64_t first_tokens = 0, first_input_tokens = 0, first_rank_tokens = 0;

  // HF's state.num_input_tokens_seen under include_num_input_tokens_seen (no: 0).
  int64_t num_input_tokens_seen(const std::string& mode) const {
    return mode == "all" ? input_tokens_seen : mode == "non_padding" ? tokens_seen : 0;
  }
  int64_t first_num_input_tokens(const std::string& mode) const {
    return mode == "all" ? first_input_tokens : mode == "non_padding" ? first_tokens : 0;
  }
};

// The log (train_log.cpp; HF TrainerState.log_history and LLaMA-Factory's trainer_log.jsonl)
// and what its lines say of the run's shape.
struct LogState {
  json log_history = json::array();
  std::unique_ptr<TrainerLogWriter> log_writer;
  std::unique_ptr<tfevents::ScalarLog> tensorboard;  // report_to: tensorboard (output_dir/runs/)
  Clock::time_point start;
  int64_t total_steps = 0;
  int64_t steps_per_epoch = 1;
  // The last checkpoint's step (-1: none): HF's TrainerControl flags in trainer_state.json are
  // those of the last save (its stateful_callbacks are stored only then).
  int64_t last_save_step = -1;
};

// The trainer's state: what the setup fixes (model, strategy, sizes; read by every part), then
// one part per piece of the loop, each written by that piece alone (restored by a checkpoint).
struct Trainer::State {
  TrainerSetup s;
  const config::JobPlan& c = s.plan;
  model::CausalLM& m;
  c10::Device device;
  std::unique_ptr<parallel::ParallelStrategy> own_strategy;  // when the setup gave none
  parallel::ParallelStrategy* strategy = nullptr;
  int64_t rank = 0, world = 1;
  int64_t non_embedding_params = 0;
  ModelFlops model_flops;  // for lf_train_mfu
  // Mixture of experts: router_aux_loss_coef of the load-balancing loss in training (moe_aux_loss_coef,
  // else the config.json's under output_router_logits); 0: the loss is not computed.
  double aux_coef = 0;
  bool aux_trains = true;  // false: only logged (router_loss_coef.h's router_aux_loss_trains)
  // The current step's load-balancing losses (train_step.cpp): the gradient weight of its micro-steps
  // (aux_coef x the loss scale; 0 when only logged), this rank's sum of them and their count.
  struct AuxStep {
    double grad_weight = 0;
    at::Tensor sum;
    int64_t batches = 0;
  } aux_step;
  double peak_flops = 0;   // the device's peak FLOP/s (peak_flops.h); 0: MFU not reported
  // pure_bf16 off a GPU (model::pad_masked_logits: LF_PAD_MASKED_LOGITS): the bf16 gradients rounded where HF's
  // run rounds them, bit for bit: the LM head unchunked (lm_head_loss_sum_unchunked) and, on padded rows, HF's
  // padding mask with repeated kv heads (a KeyPaddingScope) instead of flash attention's causal GQA.
  bool hf_bf16_rounding = false;

  StepState stepper;    // train_step.cpp
  JobCounters counts;   // run_epoch (trainer.cpp)
  LogState logs;        // train_log.cpp
  // How a micro-batch becomes a loss and metrics (objective.h; the stage's), and its metric sums over
  // every rank since the last log line (run_step adds each step's, log_step hands them to it).
  std::unique_ptr<Objective> objective;
  std::vector<double> metrics_since_log;
  json last_step_metrics = json::object();  // the objective's metrics of the last step alone (metrics endpoint)
  json eval_extra;  // the objective's last evaluation (eval_rewards/*, eval_accuracy); null: none

  explicit State(TrainerSetup setup)
      : s(std::move(setup)), m(*s.model), device(s.model->lm_head_weight().device()) {}

  // ---- trainer.cpp
  TrainPlan make_plan();
  // This rank's micro-batches of epoch 0, step by step (empty where it has none), up to the run's last
  // step: Objective::prepare.
  std::vector<std::vector<int64_t>> first_epoch_micro_batches(const TrainPlan& plan) const;
  // Sum of token CEs of one micro-batch (forward; backward is the caller's): the one forward
  // of training, evaluation and the CUDA graphs' captured micro-step, through the strategy's
  // unit hooks and the head's gradient route. target_rows (lm_loss.h): the target positions,
  // found on the host; undefined: every position through the head, ignored ones masked (no
  // host sync, shapes fixed by [B,T]: what a graph can capture).
  at::Tensor forward_loss_sum(const DeviceBatch& d, const at::Tensor& target_rows);
  at::Tensor forward_loss_sum(const Batch& b);  // to the device, target rows from the host labels
  double evaluate();
  void report_progress(const StepRecord& r);  // the step's numbers to the agent (heartbeats)
  // ---- step_graph use (train_step.cpp): the graph of this run's micro-step, or nullptr.
  std::unique_ptr<MicroStepGraph> make_graph();
  // One micro-step's forward and backward of loss x factor, eagerly; returns the loss sum. With the
  // load-balancing loss on, its gradient weighs aux_step.grad_weight and its value joins aux_step.
  at::Tensor eager_micro_step(const Batch& b, double factor, PhaseClock& phases);
  // A micro-step of a rank with no examples under a strategy that needs every forward.
  void forward_backward_without_targets();
  void run_epoch(int64_t epoch, const TrainPlan& plan, LoopState& loop, TrainSummary& sum, class PhaseClock& phases,
                 class StepTrace& trace, const ProgressDisplay& display);

  // ---- train_step.cpp
  // The stage's objective, once the strategy exists (lm_objective.cpp for sft and pt).
  void make_objective();
  // fp16 unscaling, clipping (grad_norm: the global norm) and the update of step `step`, whose
  // gradients are in; zeroes them. True when fp16 overflowed and the update was skipped.
  bool update(double lr, double scale, int64_t step, const ProgressDisplay& display, double& grad_norm);
  // Step `step_in_epoch` of the epoch with permutation `perm`, launched; read at its end (as fp16's loss scale,
  // multi-rank sums or LF_LATE_READBACK=0 need) or, where late_readback() allows, with its update launched
  // and its numbers left on the device for read_step (step_readback.cpp).
  PendingStep run_step(const std::vector<int64_t>& perm, int64_t step_in_epoch, const LoopState& loop,
                       const TrainPlan& plan, int64_t& micro_done, PhaseClock& phases, const ProgressDisplay& display);

  // ---- step_readback.cpp
  // Whether this run's steps can launch their update before their numbers are read: one process, no fp16
  // scaler, no LF_PROFILE_PHASES syncs, LF_LATE_READBACK on (the strategy must also clip on the device).
  bool late_readback(const PhaseClock& phases) const;
  // The step's device values on the host: the loss (with the load-balancing loss), the objective's metrics,
  // the counters summed over ranks, the norm; NonFiniteLossError on a non-finite loss.
  void read_step(PendingStep& p, const TrainPlan& plan, const LoopState& loop);
  StepValues read_device_values(PendingStep& p);
  // A launched step's end: read (if not yet), counted, reported and logged (run_epoch, in step order).
  void complete_step(PendingStep& p, const TrainPlan& plan, LoopState& loop, TrainSummary& sum,
                     const ProgressDisplay& display);

  // ---- train_log.cpp
  // One HF log_history entry; also a trainer_log.jsonl line (LLaMA-Factory's fields).
  void log_event(json entry, const json& lf_extra, int64_t step);
  // After each step: the logging_steps line, the progress display.
  void log_step(const StepRecord& r, const TrainPlan& plan, LoopState& loop, const ProgressDisplay& display);
  // An evaluation during training, logged as HF logs it.
  void evaluate_and_log(LoopState& loop, TrainSummary& sum, const ProgressDisplay& display);
  json eval_metrics(double eval_loss, double seconds, double epoch) const;
  json trainer_state(int64_t global_step, double epoch) const;

  // ---- trainer_save.cpp
  void save_model(const std::filesystem::path& dir);
  // output_dir/checkpoint-N through the per-rank commit (every rank calls it); honours
  // save_total_limit.
  void save_checkpoint(const LoopState& loop);
  // DESIGN "RNG": the generators' states for a checkpoint: this rank's ("cpu", and "cuda" on a
  // GPU) and, with world > 1, every rank's ("rank1.cpu", ...), gathered: a collective, so
  // every rank calls it at every save, rank 0 writing the result.
  TensorList rng_states_to_save();
  // Restores a save_checkpoint() folder into the model, optimizer, scaler, log history and
  // RNGs; returns the loop counters to restart from.
  LoopState load_checkpoint(const std::filesystem::path& dir);

  // ---- final_outputs.cpp
  void finish(TrainSummary& sum, const TrainPlan& plan, const LoopState& loop, const PhaseClock& phases);
};

}  // namespace lf::train
