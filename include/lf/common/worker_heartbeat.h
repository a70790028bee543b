#pragma once
// A worker's side of the agent's heartbeat channel (LF_HEARTBEAT_FD, set by
// `lf-train launch`): each call tells the agent "alive", with a short progress
// note. Without the variable (run by hand) it does nothing. Once a worker has
// heartbeated, going silent past --worker-heartbeat-timeout counts as a hang.
// Thread-safe (one write() per call).
#include <string_view>

namespace lf {

void worker_heartbeat(std::string_view progress = {});

}  // namespace lf
