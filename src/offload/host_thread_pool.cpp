// HostThreadPool: one generation counter under a mutex; a parallel_for bumps it,
// each worker runs its piece of that generation and the last one done wakes the
// caller. Pieces are megabytes of optimizer state, so a condition-variable wake
// (microseconds) is noise next to the work.
#include "lf/offload/host_thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "lf/common/env.h"
#include "lf/common/env_knobs.h"
#include "lf/common/error.h"

namespace lf::offload {

namespace {

constexpr int64_t kPieceAlign = 64;  // elements: whole cache lines of fp32 and of bf16
thread_local const HostThreadPool* tls_running_pool = nullptr;

}  // namespace

HostThreadPool::HostThreadPool(int threads) {
  LF_CHECK(threads >= 1 && threads <= 4096, ConfigError, "host thread pool: threads must be in [1, 4096], got {}",
           threads);
  workers_.reserve(threads - 1);
  for (int i = 0; i + 1 < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

HostThreadPool::~HostThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void HostThreadPool::run_piece(int piece) noexcept {
  const int64_t begin = piece * job_piece_;
  const int64_t end = std::min(job_n_, begin + job_piece_);
  const HostThreadPool* outer = tls_running_pool;
  tls_running_pool = this;
  try {
    (*job_)(begin, end);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_) error_ = std::current_exception();
  }
  tls_running_pool = outer;
}

void HostThreadPool::worker_loop(int index) {
  const std::string name = "lf-hostadam-" + std::to_string(index + 1);
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
  uint64_t seen = 0;
  for (;;) {
    int piece;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      piece = index + 1;  // piece 0 is the caller's
      if (piece >= job_pieces_) continue;
    }
    run_piece(piece);
    std::lock_guard<std::mutex> lock(mu_);
    if (--pending_ == 0) done_cv_.notify_one();
  }
}

void HostThreadPool::parallel_for(int64_t n, int64_t grain, const RangeFn& f) {
  LF_CHECK(n >= 0 && grain >= 1, ConfigError, "host thread pool: parallel_for needs n >= 0 and grain >= 1, got {}, {}",
           n, grain);
  if (n == 0) return;
  // Pieces: as many threads as there are grains of work, each piece a multiple of kPieceAlign.
  const int64_t by_grain = std::max<int64_t>(1, n / grain);
  const int pieces_wanted = static_cast<int>(std::min<int64_t>(size(), by_grain));
  if (pieces_wanted == 1 || tls_running_pool != nullptr) {
    f(0, n);  // too small to split, or called from inside a piece: run inline
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mu_);
  int64_t piece = (n + pieces_wanted - 1) / pieces_wanted;
  piece = (piece + kPieceAlign - 1) / kPieceAlign * kPieceAlign;
  const int pieces = static_cast<int>((n + piece - 1) / piece);
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &f;
    job_n_ = n;
    job_piece_ = piece;
    job_pieces_ = pieces;
    pending_ = pieces - 1;
    error_ = nullptr;
    ++generation_;
  }
  work_cv_.notify_all();
  run_piece(0);
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return pending_ == 0; });
    job_ = nullptr;
    error = error_;
    error_ = nullptr;
  }
  if (error) std::rethrow_exception(error);
}

int host_adam_threads_for_this_worker() {
  if (const auto forced = knob_int("LF_HOST_ADAM_THREADS")) {
    LF_CHECK(*forced >= 1 && *forced <= 4096, ConfigError,
             "LF_HOST_ADAM_THREADS={}: expected a thread count in [1, 4096]", *forced);
    return static_cast<int>(*forced);
  }
  const int64_t local_world = env_int("LOCAL_WORLD_SIZE").value_or(1);
  LF_CHECK(local_world >= 1, ConfigError, "LOCAL_WORLD_SIZE={}: expected >= 1", local_world);
  // A dynamically sized set: a host may have more CPUs than cpu_set_t's 1024.
  int cpus = 0;
  for (int capacity = 1024; capacity <= (1 << 20) && cpus == 0; capacity *= 4) {
    cpu_set_t* set = CPU_ALLOC(capacity);
    const size_t bytes = CPU_ALLOC_SIZE(capacity);
    if (sched_getaffinity(0, bytes, set) == 0) cpus = CPU_COUNT_S(bytes, set);
    CPU_FREE(set);
    if (cpus == 0 && errno != EINVAL) break;
  }
  if (cpus <= 0) cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max<int>(1, static_cast<int>(cpus / local_world));
}

}  // namespace lf::offload
