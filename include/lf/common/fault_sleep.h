#pragma once
// LF_FAULT_SLEEP: a test and diagnosis knob that makes a worker sleep inside a phase, to check
// what the agent's progress deadlines (progress_deadline.h) make of a slow one:
//   LF_FAULT_SLEEP=PHASE:SECONDS[@RANK][,PHASE:SECONDS[@RANK]...]
// PHASE is a heartbeat phase name (loading, tokenizing, training, evaluating, saving); each
// entry sleeps once, the first time this worker enters that phase (training: right after its
// first step), on every rank or only on global rank RANK. The liveness thread beats on
// meanwhile, so only the progress deadline can see it. Never set it in production.
#include <optional>
#include <string_view>
#include <vector>

#include "lf/common/heartbeat_line.h"

namespace lf {

struct FaultSleep {
  WorkerPhase phase = WorkerPhase::kLoading;
  double seconds = 0;
  int rank = -1;  // -1: every rank
};

// ConfigError naming the knob, the bad entry and the expected form.
std::vector<FaultSleep> parse_fault_sleep(std::string_view spec);

// LF_FAULT_SLEEP's entries for global rank `rank` (empty when unset).
std::vector<FaultSleep> fault_sleeps_from_env(int rank);

}  // namespace lf
