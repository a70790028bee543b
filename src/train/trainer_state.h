#pragma once
// Trainer's internal state, shared by trainer.cpp (the loop, evaluation) and
// trainer_save.cpp (log events, trainer_state.json, model and checkpoint saving).
// Internal to lf_train. Not thread-safe.
#include <ATen/ATen.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "lf/optim/adamw.h"
#include "lf/optim/grad_utils.h"
#include "lf/optim/lr_schedule.h"
#include "lf/train/batch.h"
#include "lf/train/trainer.h"
#include "outputs.h"

namespace lf::train {

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

struct Trainer::State {
  TrainerSetup s;
  config::TrainConfig& c = s.config;
  model::CausalLM& m;
  c10::Device device;
  std::vector<std::pair<std::string, at::Tensor>> trainable;  // HF names
  std::vector<at::Tensor> params;
  std::unique_ptr<optim::AdamW> opt;
  optim::LrSchedule sched;
  optim::DynamicLossScaler scaler;
  bool fp16 = false;
  int64_t sched_step = 0;  // HF's LambdaLR counter: advances only on steps that updated
  int64_t non_embedding_params = 0;

  // Log state (HF TrainerState.log_history and LLaMA-Factory's trainer_log.jsonl).
  json log_history = json::array();
  std::unique_ptr<TrainerLogWriter> log_writer;
  Clock::time_point start;
  int64_t total_steps = 0;
  int64_t steps_per_epoch = 1;
  int64_t tokens_seen = 0;
  // Where this process started (a resumed run): speeds and ETAs count only its own work.
  int64_t first_step = 0;
  int64_t first_tokens = 0;
  double flos = 0;

  explicit State(TrainerSetup setup)
      : s(std::move(setup)), m(*s.model), device(s.model->lm_head_weight().device()) {}

  // Sum of token CEs of one micro-batch (forward; backward is the caller's).
  at::Tensor forward_loss_sum(const Batch& b, bool training);
  double evaluate();
  // One HF log_history entry; also a trainer_log.jsonl line (LLaMA-Factory's fields).
  void log_event(json entry, const json& lf_extra, int64_t step);
  json trainer_state(int64_t global_step, double epoch) const;
  void save_model(const std::filesystem::path& dir);
  // output_dir/checkpoint-N, written to a temp folder and renamed; honours save_total_limit.
  // `loop` carries the loop's own counters (loss sums, last logged step) for resume.
  // `rng`: what rng_states_to_save() gave.
  void save_checkpoint(int64_t global_step, double epoch, const json& loop, const TensorList& rng);
  // DESIGN "RNG": the generators' states for a checkpoint: this rank's ("cpu", and "cuda" on a
  // GPU) and, with world > 1, every rank's ("rank1.cpu", ...), gathered: a collective, so
  // every rank calls it at every save, rank 0 writing the result.
  TensorList rng_states_to_save();
  // Restores a save_checkpoint() folder into the model, optimizer, scaler, log history and
  // RNGs; returns lf_trainer_state.json (the counters the loop restarts from).
  json load_checkpoint(const std::filesystem::path& dir);
};

}  // namespace lf::train
