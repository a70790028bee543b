#include "lf/common/progress_deadline.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "lf/common/env.h"
#include "lf/common/env_knobs.h"
#include "lf/common/error.h"
#include "lf/common/worker_heartbeat.h"

namespace lf {

namespace {

// 0 means no deadline; the registry refuses a negative value.
double seconds(std::optional<double> v) { return v.value_or(0); }

bool knob_deadlines_enabled() { return knob_bool("LF_PROGRESS_DEADLINES").value_or(true); }
// A factor, not seconds, so the registry's kSeconds check does not cover it; a negative
// factor would make every step "late".
double knob_step_factor() {
  const double f = seconds(knob_number("LF_PROGRESS_STEP_FACTOR"));
  LF_CHECK(f >= 0, ConfigError,
           "environment variable LF_PROGRESS_STEP_FACTOR={}: expected a number >= 0 (the step deadline is "
           "factor x the median step time; 0 turns the step deadline off)",
           f);
  return f;
}
double knob_step_floor_s() { return seconds(knob_number("LF_PROGRESS_STEP_FLOOR_S")); }
double knob_first_step_s() { return seconds(knob_number("LF_PROGRESS_FIRST_STEP_TIMEOUT_S")); }
double knob_load_s() { return seconds(knob_number("LF_PROGRESS_LOAD_TIMEOUT_S")); }
double knob_tokenize_s() { return seconds(knob_number("LF_PROGRESS_TOKENIZE_TIMEOUT_S")); }
double knob_eval_s() { return seconds(knob_number("LF_PROGRESS_EVAL_TIMEOUT_S")); }
double knob_save_s() { return seconds(knob_number("LF_PROGRESS_SAVE_TIMEOUT_S")); }

}  // namespace

ProgressDeadlines ProgressDeadlines::from_env() {
  ProgressDeadlines d;
  d.enabled = knob_deadlines_enabled();
  d.step_factor = knob_step_factor();
  d.step_floor_s = knob_step_floor_s();
  d.first_step_s = knob_first_step_s();
  d.load_s = knob_load_s();
  d.tokenize_s = knob_tokenize_s();
  d.eval_s = knob_eval_s();
  d.save_s = knob_save_s();
  return d;
}

void StepDeadline::add(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return;
  seconds_.push_back(seconds);
  if (seconds_.size() > kWindow) seconds_.pop_front();
}

double StepDeadline::median() const {
  if (seconds_.empty()) return 0;
  std::vector<double> v(seconds_.begin(), seconds_.end());
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);  // the upper median: the generous one
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

double StepDeadline::deadline_s() const { return std::max(floor_s_, factor_ * median()); }

ProgressReporter::ProgressReporter(ProgressDeadlines deadlines, Sink sink, std::vector<FaultSleep> faults)
    : d_(deadlines), sink_(std::move(sink)), faults_(std::move(faults)), steps_(d_.step_factor, d_.step_floor_s) {}

double ProgressReporter::deadline_for(WorkerPhase phase) const {
  std::lock_guard lock(mu_);
  if (!d_.enabled) return 0;
  switch (phase) {
    case WorkerPhase::kLoading: return d_.load_s;
    case WorkerPhase::kTokenizing: return d_.tokenize_s;
    case WorkerPhase::kTraining:
      return steps_.count() == 0 ? std::max(d_.step_floor_s, d_.first_step_s) : steps_.deadline_s();
    case WorkerPhase::kEvaluating: return d_.eval_s;
    case WorkerPhase::kSaving: return d_.save_s;
    case WorkerPhase::kDone: return 0;
  }
  return 0;
}

std::string ProgressReporter::payload() const {
  ProgressMetrics m = step_metrics_;
  m.merge(notes_);
  return m.to_json();
}

void ProgressReporter::beat(WorkerPhase phase, int64_t step) {
  std::lock_guard lock(mu_);
  step_ = std::max(step_, step);
  if (sink_) sink_(phase, step_, deadline_for(phase), payload());
  // Test/diagnosis only (LF_FAULT_SLEEP): after the beat, so the agent holds this phase's deadline.
  for (auto& f : faults_) {
    if (f.phase != phase || f.seconds <= 0) continue;
    spdlog::warn("LF_FAULT_SLEEP: sleeping {} s in phase {} (step {})", f.seconds, phase_name(phase), step_);
    std::this_thread::sleep_for(std::chrono::duration<double>(f.seconds));
    f.seconds = 0;  // once
  }
}

void ProgressReporter::loading() { beat(WorkerPhase::kLoading, step_); }
void ProgressReporter::tokenizing() { beat(WorkerPhase::kTokenizing, step_); }
void ProgressReporter::training_begins(int64_t step) {
  std::lock_guard lock(mu_);
  // A resumed run's earlier step times are not this run's (another machine, another world).
  if (step_ < step) step_ = step;
  if (sink_) sink_(WorkerPhase::kTraining, step_, deadline_for(WorkerPhase::kTraining), payload());
}

void ProgressReporter::step_done(int64_t step, double seconds, ProgressMetrics metrics) {
  std::lock_guard lock(mu_);
  steps_.add(seconds);
  metrics.step_s = seconds;
  step_metrics_ = std::move(metrics);
  beat(WorkerPhase::kTraining, step);
}

void ProgressReporter::evaluating(int64_t step) { beat(WorkerPhase::kEvaluating, step); }
void ProgressReporter::saving(int64_t step) { beat(WorkerPhase::kSaving, step); }
void ProgressReporter::done() { beat(WorkerPhase::kDone, step_); }
void ProgressReporter::note(std::optional<double> ProgressMetrics::*field, double value) {
  std::lock_guard lock(mu_);
  notes_.*field = value;
}

ProgressReporter& progress_reporter() {
  static ProgressReporter* reporter = [] {
    start_worker_liveness();
    const int rank = static_cast<int>(env_int("RANK").value_or(0));
    ProgressReporter::Sink sink;
    if (heartbeat_channel_open())
      sink = [](WorkerPhase p, int64_t step, double deadline, const std::string& metrics) {
        worker_progress(p, step, deadline, metrics);
      };
    return new ProgressReporter(ProgressDeadlines::from_env(), std::move(sink), fault_sleeps_from_env(rank));
  }();
  return *reporter;
}

}  // namespace lf
