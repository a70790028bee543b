#pragma once
// What the agent knows of one worker from its heartbeat channel (wire format:
// lf/common/heartbeat_line.h), and when that worker counts as hung:
//   - silent (no bytes at all) past the liveness timeout, once it sent anything: the whole
//     process stopped (SIGSTOP, a debugger, a frozen machine);
//   - past the deadline its last progress beat promised, once it sent one: alive but stuck
//     (a deadlocked collective, a wait that never ends).
// A worker that never writes to the channel (a torchrun script) is never held to either.
// Time is passed in, so tests drive it without sleeping. Threading: the agent's io thread.
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lf/common/heartbeat_line.h"

namespace lf::agent {

// A snapshot for logs and the metrics exporter: the rank's last beat and payload.
struct HeartbeatStatus {
  bool heard = false;     // any beat so far
  bool progress = false;  // any progress beat so far (the fields below are from the last one)
  WorkerPhase phase = WorkerPhase::kLoading;
  int64_t step = 0;
  double deadline_s = 0;
  std::string metrics_json = "{}";
  double since_beat_s = 0;      // since any byte
  double since_progress_s = 0;  // since the last progress beat
};

// One progress beat as it came (node 0's live page draws global rank 0's, step by step).
struct ProgressBeat {
  WorkerPhase phase = WorkerPhase::kLoading;
  int64_t step = 0;
  std::string metrics_json;
};

class WorkerWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // liveness_timeout_s <= 0: liveness is not checked (progress deadlines still are).
  explicit WorkerWatch(double liveness_timeout_s) : liveness_timeout_s_(liveness_timeout_s) {}

  // Bytes read from the channel at `now` (any split: lines are reassembled).
  void feed(std::string_view bytes, Clock::time_point now);

  // Why the worker counts as hung at `now` ("no heartbeat for 31.0 s ..."), or nullopt.
  std::optional<std::string> overdue(Clock::time_point now) const;

  HeartbeatStatus status(Clock::time_point now) const;

  // The first malformed progress line's problem, once (the agent warns about it).
  std::optional<std::string> take_problem();

  // The progress beats since the last call (at most kKeptBeats: the oldest go first).
  std::vector<ProgressBeat> take_beats();
  static constexpr size_t kKeptBeats = 1024;

 private:
  void on_line(std::string_view line, Clock::time_point now);
  std::string last_progress(Clock::time_point now) const;

  double liveness_timeout_s_;
  std::string partial_;
  bool skipping_ = false;  // inside a line longer than kMaxHeartbeatLine
  bool heard_ = false;
  Clock::time_point last_beat_{};
  std::optional<HeartbeatLine> progress_;
  Clock::time_point last_progress_{};
  std::optional<std::string> problem_;
  bool problem_taken_ = false;
  std::deque<ProgressBeat> beats_;
};

}  // namespace lf::agent
