#include "lf/metrics/gpu_sampler.h"

#include <algorithm>

namespace lf::metrics {

GpuSampler::GpuSampler(double interval_s, const std::string& library)
    : interval_(std::max(interval_s, 0.05)) {
  nvml_ = Nvml::open(&why_, library);
  if (!nvml_) return;
  driver_ = nvml_->driver_version();
  thread_ = std::thread([this] { loop(); });
}

GpuSampler::~GpuSampler() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::vector<GpuSample> GpuSampler::latest(std::chrono::steady_clock::time_point* taken) const {
  std::lock_guard lock(mu_);
  if (taken) *taken = taken_;
  return latest_;
}

void GpuSampler::loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    auto samples = nvml_->sample();
    lock.lock();
    latest_ = std::move(samples);
    taken_ = std::chrono::steady_clock::now();
    ++taken_count_;
    wake_.wait_for(lock, interval_, [this] { return stop_; });
  }
}

}  // namespace lf::metrics
