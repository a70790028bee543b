#pragma once
// LF_PROFILE_TRACE=DIR: a Chrome/Perfetto trace (torch's Kineto profiler: host ops and, on
// GPU, every kernel on every stream) of a few steady steps, one file per rank,
// DIR/trace-rank<R>.json. LF_PROFILE_TRACE_STEPS=FIRST:LAST picks the optimizer steps
// (default 6:7, after warm-up; 0 is the pass before step 1, dpo/kto's reference log-probabilities). Unlike LF_PROFILE_PHASES it adds no syncs, so it shows
// what overlaps what: compute vs NCCL streams, and where the GPU waits for the host.
// scripts/bench/trace_summary.py reads the files. Off by default (one branch per step).
#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>

#include "lf/config/job_plan.h"

namespace lf::train {

class StepTrace {
 public:
  // Off unless the plan's logging.profile_trace names a folder (LF_PROFILE_TRACE).
  StepTrace(c10::Device device, int rank, const config::LoggingSection& logging);
  ~StepTrace();
  StepTrace(const StepTrace&) = delete;
  StepTrace& operator=(const StepTrace&) = delete;
  void step_begins(int64_t step);  // 1-based optimizer step about to run (0: the pass before step 1)
  void step_ended(int64_t step);   // writes the file after LAST

 private:
  c10::Device device_;
  int rank_ = 0;
  std::filesystem::path dir_;
  int64_t first_ = 6, last_ = 7;
  bool active_ = false;
};

}  // namespace lf::train
