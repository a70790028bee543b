#pragma once
// ZeRO-Offload's optimizer step on a host thread of its own, unit by unit in forward order,
// while the training thread goes on: the next step's forward of unit u waits only for unit u
// (wait_unit), so the host AdamW of the later units overlaps the GPU's forward of the earlier
// ones, and each unit's copy up overlaps the host's work on the next (DeepSpeed's ZeRO-Offload
// runs the whole step before the next forward).
// Threading: start / wait_* from the training thread; the job runs on the pipeline's thread.
// An exception in the job is rethrown by the next wait.
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace lf::parallel {

class HostStepPipeline {
 public:
  HostStepPipeline();
  ~HostStepPipeline();
  HostStepPipeline(const HostStepPipeline&) = delete;
  HostStepPipeline& operator=(const HostStepPipeline&) = delete;

  // Runs job(u) for u = 0 .. units-1 in order on the pipeline's thread; returns at once. The
  // previous job must be finished (wait_all).
  void start(int64_t units, std::function<void(int64_t)> job);
  // Blocks until job(u) of the last start() has returned; at once when none runs.
  void wait_unit(int64_t unit);
  bool unit_done(int64_t unit);
  void wait_all();

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void(int64_t)> job_;
  int64_t units_ = 0, done_ = 0;  // job(u) has returned for u < done_
  bool running_ = false, stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace lf::parallel
