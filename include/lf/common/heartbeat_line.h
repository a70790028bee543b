#pragma once
// The wire format of the worker heartbeat channel (LF_HEARTBEAT_FD, a local stream socket
// from each worker to its node's agent): one line per beat, '\n'-terminated, each a JSON
// object (version 1):
//
//   {"v":1,"kind":"alive"}
//       liveness: "this process runs". lf-worker sends one every second from a thread of
//       its own (worker_heartbeat.h), whatever the training loop does.
//   {"v":1,"kind":"progress","phase":"training","step":41,"deadline_s":120.5,
//    "metrics":{"loss":1.93,"learning_rate":2e-05,"grad_norm":0.71,...}}
//       progress: the training loop reached `phase` (loading, tokenizing, training,
//       evaluating, saving, done; step: the last finished optimizer step) and promises its
//       next progress beat within deadline_s seconds (<= 0: no promise, as in "done").
//       metrics: an open JSON object the agent keeps as the rank's last payload (the metrics
//       exporter reads it); lf-worker writes and the agent reads ProgressMetrics
//       (progress_metrics.h), one struct for both sides.
//
// Any other line (plain text, a JSON value that is not such an object, a progress line with
// a bad field) counts as liveness only, so `lf-train launch -- python train.py` scripts that
// write anything to the descriptor keep working. Lines over kMaxHeartbeatLine bytes are
// liveness too. Torch-free; no state.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lf {

// Where a worker is. Order is not meaningful; names are the wire spelling.
enum class WorkerPhase { kLoading, kTokenizing, kTraining, kEvaluating, kSaving, kDone };

const char* phase_name(WorkerPhase phase);
std::optional<WorkerPhase> parse_phase(std::string_view name);

constexpr size_t kMaxHeartbeatLine = 64 * 1024;

struct HeartbeatLine {
  enum class Kind { kAlive, kProgress };
  Kind kind = Kind::kAlive;
  // kProgress only:
  WorkerPhase phase = WorkerPhase::kLoading;
  int64_t step = 0;
  double deadline_s = 0;     // <= 0: none
  std::string metrics_json;  // the "metrics" object as compact JSON text; "{}" when absent
  // Set when the line looked like a progress beat but was not one (why it counts as liveness only).
  std::string problem;
};

// One line without its '\n'. Never throws: a bad line is liveness (see above).
HeartbeatLine parse_heartbeat_line(std::string_view line);

std::string alive_line();  // with '\n'
// metrics_json must be a JSON object's text (an invalid one is sent as {} with "metrics_error").
std::string progress_line(WorkerPhase phase, int64_t step, double deadline_s, std::string_view metrics_json);

}  // namespace lf
