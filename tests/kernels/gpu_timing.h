#pragma once
// Benchmark lines of the GPU kernel tests (printed, never asserted): the mean milliseconds of one call of f
// on the CUDA device, after 3 warm-up calls, over 20 calls bracketed by device syncs.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <chrono>
#include <functional>

namespace lf::kernels::testing {

inline double gpu_ms_of(const std::function<void()>& f) {
  const auto sync = [] { c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->synchronizeDevice(0); };
  for (int i = 0; i < 3; ++i) f();
  sync();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) f();
  sync();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 20;
}

}  // namespace lf::kernels::testing
