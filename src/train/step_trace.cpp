#include "step_trace.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <spdlog/spdlog.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <cstdio>

#include "lf/common/env.h"
#include "lf/common/env_knobs.h"
#include "lf/common/error.h"

namespace lf::train {
namespace {

namespace prof = torch::profiler::impl;

std::set<prof::ActivityType> activities(const c10::Device& device) {
  std::set<prof::ActivityType> a{prof::ActivityType::CPU};
  if (device.is_cuda()) a.insert(prof::ActivityType::CUDA);
  return a;
}

void sync(const c10::Device& device) {
  if (device.is_cuda()) c10::impl::getDeviceGuardImpl(device.type())->synchronizeDevice(device.index());
}

}  // namespace

StepTrace::StepTrace(c10::Device device, int rank) : device_(device), rank_(rank) {
  const auto dir = knob_string("LF_PROFILE_TRACE");
  if (!dir || dir->empty()) return;
  dir_ = *dir;
  if (const auto steps = knob_string("LF_PROFILE_TRACE_STEPS"); steps && !steps->empty()) {
    long long a = 0, b = 0;
    LF_CHECK(std::sscanf(steps->c_str(), "%lld:%lld", &a, &b) == 2 && a >= 1 && b >= a, ConfigError,
             "LF_PROFILE_TRACE_STEPS={}: expected FIRST:LAST optimizer steps, 1 <= FIRST <= LAST", *steps);
    first_ = a;
    last_ = b;
  }
  std::filesystem::create_directories(dir_);
}

StepTrace::~StepTrace() {
  if (active_) torch::autograd::profiler::disableProfiler();  // an exception left it on: drop the partial trace
}

void StepTrace::step_begins(int64_t step) {
  if (dir_.empty() || step != first_) return;
  const prof::ProfilerConfig config(prof::ProfilerState::KINETO);
  torch::autograd::profiler::prepareProfiler(config, activities(device_));
  sync(device_);  // the trace starts from an idle device
  torch::autograd::profiler::enableProfiler(config, activities(device_));
  active_ = true;
}

void StepTrace::step_ended(int64_t step) {
  if (!active_ || step != last_) return;
  sync(device_);
  auto result = torch::autograd::profiler::disableProfiler();
  active_ = false;
  const auto file = dir_ / fmt::format("trace-rank{}.json", rank_);
  result->save(file.string());
  spdlog::info("profile trace of steps {}-{} saved at {}", first_, last_, file.string());
}

}  // namespace lf::train
