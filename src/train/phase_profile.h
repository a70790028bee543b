#pragma once
// LF_PROFILE_PHASES=1: where a training step's time goes — forward, backward, the DDP
// reducer's finish (the communication still exposed once backward returned, plus its
// copies) and the optimizer (loss sync, clipping, update) — by synchronizing the device at
// each phase boundary. The syncs stop the host from running ahead, so steps get slower: a
// diagnosis tool, off by default, and then each lap costs one branch.
#include <c10/core/Device.h>

#include <array>
#include <chrono>

namespace lf::train {

enum class Phase { kForward = 0, kBackward, kDdpFinish, kOptimizer };
constexpr int kNumPhases = 4;
const char* phase_name(int phase);
using PhaseSeconds = std::array<double, kNumPhases>;

class PhaseClock {
 public:
  PhaseClock(c10::Device device, bool enabled);  // enabled: the plan's logging.profile_phases (LF_PROFILE_PHASES=1)
  bool enabled() const { return enabled_; }
  void start();          // the step begins (after a sync)
  void lap(Phase phase); // sync; the time since the last start/lap goes to `phase`
  PhaseSeconds take();   // this step's seconds per phase, and reset

 private:
  void sync() const;
  c10::Device device_;
  bool enabled_ = false;
  std::chrono::steady_clock::time_point last_;
  PhaseSeconds seconds_{};
};

}  // namespace lf::train
