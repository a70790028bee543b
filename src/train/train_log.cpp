// What a run tells as it goes: HF's log_history and LLaMA-Factory's trainer_log.jsonl lines,
// the logging_steps line or progress bar, and the evaluations during training.
#include <unistd.h>

#include <cstdio>

#include "lf/common/log.h"
#include "lf/common/progress_deadline.h"
#include "trainer_state.h"

namespace lf::train {

ProgressDisplay::ProgressDisplay(bool enabled) : enabled_(enabled), tty_(enabled && isatty(2)) {}

void ProgressDisplay::clear() const {
  if (tty_) std::fprintf(stderr, "\r\033[K");
}

void ProgressDisplay::bar(int64_t step, int64_t total, double loss, double lr, double tokens_per_s,
                          const std::string& eta) const {
  if (!tty_) return;
  const int width = 30;
  const int filled = static_cast<int>(width * step / total);
  std::fprintf(stderr, "\r[%s%s] %lld/%lld loss %.4f lr %.3e %.0f tok/s ETA %s   ",
               std::string(static_cast<size_t>(filled), '#').c_str(),
               std::string(static_cast<size_t>(width - filled), '.').c_str(), static_cast<long long>(step),
               static_cast<long long>(total), loss, lr, tokens_per_s, eta.c_str());
  if (step == total) std::fprintf(stderr, "\n");
}

void Trainer::State::log_event(json entry, const json& lf_extra, int64_t step) {
  const double elapsed = seconds_since(logs.start);
  const int64_t nits = counts.num_input_tokens_seen(c.logging.include_num_input_tokens_seen);
  // HF's Trainer.log: with include_num_input_tokens_seen every entry carries the count, and the
  // logging_steps lines this session's token speed.
  if (c.logging.include_num_input_tokens_seen != "no") {
    entry["num_input_tokens_seen"] = nits;
    if (entry.contains("loss")) {
      entry["train_runtime"] = round_to(elapsed, 4);
      if (elapsed > 0)
        entry["train_tokens_per_second"] = round_to(static_cast<double>(nits - counts.first_num_input_tokens(c.logging.include_num_input_tokens_seen)) / elapsed, 3);
    }
  }
  logs.log_history.push_back(entry);
  if (!logs.log_writer) return;
  const double remaining = step > counts.first_step ? elapsed / static_cast<double>(step - counts.first_step) *
                                                  static_cast<double>(logs.total_steps - step)
                                            : 0.0;
  nlohmann::ordered_json line;
  line["current_steps"] = step;
  line["total_steps"] = logs.total_steps;
  for (const char* k : {"loss", "eval_loss"})
    if (entry.contains(k)) line[k] = entry[k];
  // LLaMA-Factory's LogCallback: accuracy is TRL's rewards/accuracies (stage dpo).
  if (entry.contains("rewards/accuracies")) line["accuracy"] = entry["rewards/accuracies"];
  if (entry.contains("learning_rate")) line["lr"] = entry["learning_rate"];
  if (entry.contains("epoch")) line["epoch"] = entry["epoch"];
  line["percentage"] = logs.total_steps > 0 ? round_to(100.0 * static_cast<double>(step) / logs.total_steps, 2) : 100.0;
  line["elapsed_time"] = format_timedelta(elapsed);
  line["remaining_time"] = format_timedelta(remaining);
  if (nits > 0) {
    // LLaMA-Factory's LogCallback: HF's count over the time since training (this session) began.
    line["throughput"] = round_to(static_cast<double>(nits) / std::max(elapsed, 1e-9), 2);
    line["total_tokens"] = nits;
  } else if (c.logging.include_num_input_tokens_seen == "no" && counts.tokens_seen > 0) {
    // lf-train's own (LLaMA-Factory writes none without the count): every rank's real tokens.
    line["throughput"] = round_to(static_cast<double>(counts.tokens_seen - counts.first_tokens) / std::max(elapsed, 1e-9), 2);
    line["total_tokens"] = counts.tokens_seen;
  }
  for (auto& [k, v] : lf_extra.items()) line[k] = v;
  if (logs.tensorboard) logs.tensorboard->log(entry, line, step);
  logs.log_writer->write(line);
}

void Trainer::State::log_step(const StepRecord& r, const TrainPlan& plan, LoopState& loop,
                              const ProgressDisplay& display) {
  loop.loss_since_log += r.loss;
  loop.total_loss += r.loss;
  const int64_t step = r.step;  // a step read late is logged after the next one was launched
  const double elapsed = seconds_since(logs.start);
  const double tokens_per_s = static_cast<double>(counts.tokens_seen - counts.first_tokens) / std::max(elapsed, 1e-9);
  const auto eta = format_timedelta(elapsed / static_cast<double>(step - counts.first_step) * (plan.total - step));
  if (plan.log_every > 0 && step % plan.log_every == 0) {
    json e = {{"epoch", r.epoch},
              {"grad_norm", r.grad_norm},
              {"learning_rate", r.lr},
              {"loss", loop.loss_since_log / static_cast<double>(step - loop.last_logged)},
              {"step", step}};
    if (stepper.fp16) e["loss_scale"] = r.loss_scale;
    // The objective's metrics since the last line (TRL's reward metrics: objective.h).
    objective->log_metrics(metrics_since_log, e);
    std::fill(metrics_since_log.begin(), metrics_since_log.end(), 0.0);
    // The load-balancing loss beside the loss (trainer_log.jsonl only: HF's log_history has none).
    json extra = r.has_aux_loss ? json{{"aux_loss", r.aux_loss}} : json::object();
    log_event(e, extra, step);
    if (display.lines())
      spdlog::info("step {}/{} loss {:.4f}{} lr {:.3e} grad_norm {:.3f} {:.0f} tok/s ETA {}", step, plan.total,
                   e["loss"].get<double>(), r.has_aux_loss ? fmt::format(" (aux {:.4f})", r.aux_loss) : "", r.lr,
                   r.grad_norm, tokens_per_s, eta);
    loop.loss_since_log = 0;
    loop.last_logged = step;
  }
  display.bar(step, plan.total, r.loss, r.lr, tokens_per_s, eta);
}

json Trainer::State::eval_metrics(double eval_loss, double seconds, double epoch) const {
  const double n = static_cast<double>(s.eval->num_examples());
  json e = {{"epoch", epoch},
            {"eval_loss", eval_loss},
            {"eval_runtime", round_to(seconds, 4)},
            {"eval_samples_per_second", round_to(n / seconds, 3)},
            {"eval_steps_per_second", round_to(std::ceil(n / c.eval.per_device_eval_batch_size) / seconds, 3)}};
  if (eval_extra.is_object())
    for (auto& [k, v] : eval_extra.items()) e[k] = v;
  return e;
}

void Trainer::State::evaluate_and_log(LoopState& loop, TrainSummary& sum, const ProgressDisplay& display) {
  const auto t0 = Clock::now();
  progress_reporter().evaluating(loop.global_step);
  const double el = evaluate();
  progress_reporter().note(&ProgressMetrics::eval_loss, el);
  sum.evals.push_back({loop.global_step, el});
  json e = eval_metrics(el, seconds_since(t0), loop.epoch);
  e["step"] = loop.global_step;
  log_event(e, json::object(), loop.global_step);
  display.clear();
  spdlog::info("step {}/{} eval_loss {:.4f}", loop.global_step, logs.total_steps, el);
}

// HF's TrainerState as save_state() writes it; its stateful_callbacks are the TrainerControl flags
// of the last checkpoint save (all false when none was saved: HF stores them only then).
json Trainer::State::trainer_state(int64_t global_step, double epoch) const {
  const int64_t logging = resolve_interval(c.logging.logging_steps, logs.total_steps);
  json j;
  j["best_global_step"] = nullptr;
  j["best_metric"] = nullptr;
  j["best_model_checkpoint"] = nullptr;
  j["epoch"] = epoch;
  // HF: eval_steps unset is logging_steps under eval_strategy steps, else TrainerState's 500.
  j["eval_steps"] = c.eval.eval_steps ? resolve_interval(*c.eval.eval_steps, logs.total_steps)
                                 : c.eval.eval_strategy == "steps" ? logging : int64_t{500};
  j["global_step"] = global_step;
  j["is_hyper_param_search"] = false;
  j["is_local_process_zero"] = rank == 0;
  j["is_world_process_zero"] = rank == 0;
  j["log_history"] = logs.log_history;
  j["logging_steps"] = logging;
  j["max_steps"] = logs.total_steps;
  j["num_input_tokens_seen"] = counts.num_input_tokens_seen(c.logging.include_num_input_tokens_seen);
  // HF: with max_steps, the epochs those steps reach; else the configured ones, rounded up.
  j["num_train_epochs"] = c.schedule.max_steps > 0 ? (logs.total_steps + logs.steps_per_epoch - 1) / std::max<int64_t>(1, logs.steps_per_epoch)
                                          : static_cast<int64_t>(std::ceil(c.schedule.num_train_epochs));
  j["save_steps"] = resolve_interval(c.output.save_steps, logs.total_steps);
  j["stateful_callbacks"] = {{"TrainerControl",
                              {{"args",
                                {{"should_epoch_stop", false},
                                 {"should_evaluate", false},
                                 {"should_log", false},
                                 {"should_save", logs.last_save_step >= 0},
                                 {"should_training_stop", logs.last_save_step >= logs.total_steps}}},
                               {"attributes", json::object()}}}};
  j["total_flos"] = counts.flos;
  j["train_batch_size"] = c.schedule.per_device_train_batch_size;
  j["trial_name"] = nullptr;
  j["trial_params"] = nullptr;
  return j;
}

}  // namespace lf::train
