#include "phase_profile.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>


namespace lf::train {

const char* phase_name(int phase) {
  static const char* const kNames[kNumPhases] = {"forward", "backward", "ddp_finish", "optimizer"};
  return phase >= 0 && phase < kNumPhases ? kNames[phase] : "?";
}

PhaseClock::PhaseClock(c10::Device device, bool enabled) : device_(device), enabled_(enabled) {}

void PhaseClock::sync() const {
  // CPU work is synchronous already; the CPU backend's collectives are waited for by the reducer.
  if (device_.is_cuda()) c10::impl::getDeviceGuardImpl(device_.type())->synchronizeDevice(device_.index());
}

void PhaseClock::start() {
  if (!enabled_) return;
  sync();
  last_ = std::chrono::steady_clock::now();
}

void PhaseClock::lap(Phase phase) {
  if (!enabled_) return;
  sync();
  const auto now = std::chrono::steady_clock::now();
  seconds_[static_cast<int>(phase)] += std::chrono::duration<double>(now - last_).count();
  last_ = now;
}

PhaseSeconds PhaseClock::take() {
  PhaseSeconds out = seconds_;
  seconds_ = {};
  return out;
}

}  // namespace lf::train
