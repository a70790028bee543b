#pragma once
// What the training loop tells the agent about its progress, and how long it may take to say
// more. Each progress beat carries a deadline for the next one, chosen by phase, so that a
// 7B model that loads for ten minutes or a long checkpoint save is never taken for a hang
// and a step stuck in a deadlocked collective is:
//   loading (config, model, checkpoint, communicator)  LF_PROGRESS_LOAD_TIMEOUT_S      1800
//   tokenizing (the dataset)                           LF_PROGRESS_TOKENIZE_TIMEOUT_S  3600
//   the first training step                            LF_PROGRESS_FIRST_STEP_TIMEOUT_S 600
//   each later step: max(floor, factor x the median step time so far)
//                                                      LF_PROGRESS_STEP_FLOOR_S         120
//                                                      LF_PROGRESS_STEP_FACTOR           10
//   evaluating (and the step after it)                 LF_PROGRESS_EVAL_TIMEOUT_S      1800
//   saving (and the step after it: ranks that do not write wait for the one that does)
//                                                      LF_PROGRESS_SAVE_TIMEOUT_S      1800
//   done                                               none
// A deadline of 0 means none for that phase; LF_PROGRESS_DEADLINES=0 sends none at all (a
// debugger session). The agent enforces what the worker promised (agent/worker_watch.h).
// Torch-free. Threading: one reporter is driven by one thread (the training loop's).
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "lf/common/fault_sleep.h"
#include "lf/common/heartbeat_line.h"
#include "lf/common/progress_metrics.h"

namespace lf {

struct ProgressDeadlines {
  bool enabled = true;
  double step_factor = 10;
  double step_floor_s = 120;
  double first_step_s = 600;
  double load_s = 1800;
  double tokenize_s = 3600;
  double eval_s = 1800;
  double save_s = 1800;
  // The knobs above (ConfigError naming one that is not a number >= 0).
  static ProgressDeadlines from_env();
};

// The next step's deadline from the step times so far: max(floor, factor x median), the
// median over the last kWindow steps (so it follows a run that speeds up or slows down).
class StepDeadline {
 public:
  static constexpr size_t kWindow = 1000;
  StepDeadline(double factor, double floor_s) : factor_(factor), floor_s_(floor_s) {}
  void add(double seconds);
  double median() const;  // 0 before any step
  double deadline_s() const;
  size_t count() const { return seconds_.size(); }

 private:
  double factor_, floor_s_;
  std::deque<double> seconds_;
};

class ProgressReporter {
 public:
  // Where beats go: phase, last finished step, deadline (<= 0: none), metrics JSON object.
  using Sink = std::function<void(WorkerPhase, int64_t step, double deadline_s, const std::string& metrics_json)>;

  ProgressReporter(ProgressDeadlines deadlines, Sink sink, std::vector<FaultSleep> faults = {});

  void loading();
  void tokenizing();
  // Just before the first step of this run (step: the step it resumes from, 0 for a fresh start).
  void training_begins(int64_t step);
  // Optimizer step `step` finished in `seconds`; `metrics`: that step's (its step_s is set
  // here), kept and resent with later beats.
  void step_done(int64_t step, double seconds, ProgressMetrics metrics = {});
  // Every rank calls these, also those that do not write (see the table above).
  void evaluating(int64_t step);
  void saving(int64_t step);
  void done();
  // A metric that stays in every later payload until noted again (eval_loss, checkpoint_s).
  void note(std::optional<double> ProgressMetrics::*field, double value);

  // What a beat in `phase` promises now (0: none).
  double deadline_for(WorkerPhase phase) const;
  const StepDeadline& steps() const { return steps_; }

 private:
  void beat(WorkerPhase phase, int64_t step);
  std::string payload() const;

  ProgressDeadlines d_;
  Sink sink_;
  std::vector<FaultSleep> faults_;
  StepDeadline steps_;
  int64_t step_ = 0;
  ProgressMetrics step_metrics_;
  ProgressMetrics notes_;
  // One reporter per process; tests run ranks as threads of one process and share it.
  // Recursive: step_done -> beat -> deadline_for each take it.
  mutable std::recursive_mutex mu_;
};

// The process's reporter: deadlines and LF_FAULT_SLEEP from the environment, beats to the
// agent (worker_heartbeat.h); the first call also starts the liveness thread. A no-op sink
// when the worker runs without an agent.
ProgressReporter& progress_reporter();

}  // namespace lf
