#pragma once
// A worker's side of the agent's heartbeat channel (LF_HEARTBEAT_FD, set by `lf-train
// launch`; wire format: heartbeat_line.h). Two kinds of beat, because a live process is not
// necessarily a working one:
//   - liveness, from a thread of its own (start_worker_liveness): stops only when the whole
//     process does (SIGSTOP, a debugger, a machine that froze): the agent's
//     --worker-heartbeat-timeout catches that;
//   - progress, from the training loop (worker_progress, usually through ProgressReporter in
//     progress_deadline.h): phase, step, a promised deadline for the next progress beat, and
//     the metrics payload. A deadlocked collective stops these while liveness goes on.
// Without LF_HEARTBEAT_FD (run by hand) every call does nothing.
// Thread-safe: lines are written whole under one mutex, never interleaved.
#include <cstdint>
#include <string_view>

#include "lf/common/heartbeat_line.h"

namespace lf {

// Starts the liveness thread once per process (later calls do nothing); it beats every
// interval_s for the life of the process.
void start_worker_liveness(double interval_s = 1.0);

// One liveness beat now.
void worker_heartbeat();

// One progress beat: see heartbeat_line.h. metrics_json: a JSON object's text ("" = {}).
void worker_progress(WorkerPhase phase, int64_t step, double deadline_s, std::string_view metrics_json = {});

// True when LF_HEARTBEAT_FD names a channel (the worker runs under an agent).
bool heartbeat_channel_open();

}  // namespace lf
