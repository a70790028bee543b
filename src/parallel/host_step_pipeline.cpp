#include "host_step_pipeline.h"

#include "lf/common/error.h"

namespace lf::parallel {

HostStepPipeline::HostStepPipeline() : thread_([this] { loop(); }) {}

HostStepPipeline::~HostStepPipeline() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void HostStepPipeline::start(int64_t units, std::function<void(int64_t)> job) {
  std::lock_guard lock(mu_);
  LF_CHECK(!running_, BackendError, "host step pipeline: a step started before the last one finished");
  job_ = std::move(job);
  units_ = units;
  done_ = 0;
  running_ = units > 0;
  cv_.notify_all();
}

void HostStepPipeline::loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || running_; });
    if (stop_) return;
    while (done_ < units_) {
      const int64_t u = done_;
      lock.unlock();
      std::exception_ptr error;
      try {
        job_(u);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      if (error) {
        error_ = error;
        done_ = units_;  // the waiters see the error instead of waiting forever
      } else {
        ++done_;
      }
      cv_.notify_all();
    }
    running_ = false;
    job_ = nullptr;
    cv_.notify_all();
  }
}

void HostStepPipeline::wait_unit(int64_t unit) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !running_ || done_ > unit; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

bool HostStepPipeline::unit_done(int64_t unit) {
  std::lock_guard lock(mu_);
  return !running_ || done_ > unit;
}

void HostStepPipeline::wait_all() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !running_; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace lf::parallel
