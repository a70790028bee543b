#pragma once
// parallel_for over [0, n) in chunks on `threads` threads (0: all cores);
// the first exception is rethrown on the caller after all threads join.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace lf {

// The threads parallel_for(n, threads, ..., chunk) runs on.
inline int parallel_threads(size_t n, int threads, size_t chunk = 256) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return static_cast<int>(std::min<size_t>(threads, (n + chunk - 1) / chunk));
}

template <typename F>
void parallel_for(size_t n, int threads, F&& fn, size_t chunk = 256) {
  threads = parallel_threads(n, threads, chunk);
  if (threads <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex mu;
  auto work = [&] {
    try {
      for (size_t b; (b = next.fetch_add(chunk)) < n;)
        for (size_t i = b; i < std::min(n, b + chunk); ++i) fn(i);
    } catch (...) {
      std::lock_guard lock(mu);
      if (!error) error = std::current_exception();
      next = n;
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace lf
