#pragma once
// A fixed pool of threads for the host optimizer step. parallel_for splits a
// range into at most size() contiguous pieces, one per thread, the calling
// thread running the first; it returns when every piece is done and rethrows
// the first exception a piece threw.
//
// Contiguous and static on purpose: the same thread updates the same range every
// step, so on a NUMA host the pages it first touched stay local, and a streaming
// kernel has no cache to gain from finer interleaving.
//
// Threading: parallel_for calls from several threads are serialised; a call from
// inside a piece runs inline on that thread (no deadlock).
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace lf::offload {

class HostThreadPool {
 public:
  using RangeFn = std::function<void(int64_t begin, int64_t end)>;

  // threads >= 1 (ConfigError otherwise): threads - 1 workers plus the caller.
  explicit HostThreadPool(int threads);
  ~HostThreadPool();
  HostThreadPool(const HostThreadPool&) = delete;
  HostThreadPool& operator=(const HostThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // f over [0, n) in pieces of at least `grain` elements (the last may be shorter), piece
  // boundaries at multiples of 64 elements (whole cache lines of fp32 and bf16 arrays).
  void parallel_for(int64_t n, int64_t grain, const RangeFn& f);

 private:
  void worker_loop(int index);
  void run_piece(int piece) noexcept;

  std::mutex call_mu_;  // one parallel_for at a time
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  uint64_t generation_ = 0;
  bool stop_ = false;
  const RangeFn* job_ = nullptr;
  int64_t job_n_ = 0, job_piece_ = 0;
  int job_pieces_ = 0, pending_ = 0;
  std::exception_ptr error_;
  std::vector<std::thread> workers_;
};

// Threads for one worker's host optimizer: LF_HOST_ADAM_THREADS when set (>= 1,
// ConfigError otherwise), else the CPUs this process may run on (sched_getaffinity)
// divided by LOCAL_WORLD_SIZE (the workers sharing the node), at least 1.
int host_adam_threads_for_this_worker();

}  // namespace lf::offload
