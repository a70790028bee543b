#include "step_trace.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <spdlog/spdlog.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <cstdio>

#include "lf/common/env.h"
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

StepTrace::StepTrace(c10::Device device, int rank, const config::LoggingSection& logging)
    : device_(device), rank_(rank) {
  if (logging.profile_trace.empty()) return;
  dir_ = logging.profile_trace;
  first_ = logging.profile_trace_first;
  last_ = logging.profile_trace_last;
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
