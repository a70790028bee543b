#pragma once
// Samples every GPU through NVML on a thread of its own (NVML calls block for tens of ms;
// the agent's io thread must not), keeping the latest samples for scrapes and health rules.
// Without NVML the sampler is inert: latest() is empty and `unavailable()` says why once.
// Threading: latest() from any thread; construction and destruction from one.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lf/metrics/nvml.h"

namespace lf::metrics {

class GpuSampler {
 public:
  // library: the NVML library to load (LF_NVML_LIBRARY overrides libnvidia-ml.so.1).
  GpuSampler(double interval_s, const std::string& library);
  ~GpuSampler();

  // The last samples (empty without NVML or before the first) and when they were taken.
  std::vector<GpuSample> latest(std::chrono::steady_clock::time_point* taken = nullptr) const;
  bool available() const { return nvml_ != nullptr; }
  const std::string& unavailable() const { return why_; }
  std::string driver_version() const { return driver_; }
  // Samples taken so far (tests wait on it).
  uint64_t samples_taken() const { return taken_count_.load(); }

 private:
  void loop();

  std::unique_ptr<Nvml> nvml_;
  std::string why_, driver_;
  std::chrono::duration<double> interval_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::vector<GpuSample> latest_;
  std::chrono::steady_clock::time_point taken_{};
  std::atomic<uint64_t> taken_count_{0};
  std::thread thread_;
};

}  // namespace lf::metrics
