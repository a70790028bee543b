#pragma once
// Progress of tokenizing a large dataset: on a terminal one bar redrawn in place
// (stderr), otherwise (a worker's pipe, a log file) a plain line every 10%. Small
// datasets (fewer than kMinExamples) print nothing. tick() is thread-safe: the
// parallel_for workers call it.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>

namespace lf {

class TokenizeProgress {
 public:
  static constexpr size_t kMinExamples = 5000;

  TokenizeProgress(size_t total, std::string what);
  ~TokenizeProgress();  // finishes the bar (a newline) if one was drawn
  void tick();

 private:
  void report(size_t done);

  size_t total_;
  std::string what_;
  bool enabled_, tty_;
  std::atomic<size_t> done_{0};
  std::mutex mu_;
  int last_decile_ = 0;
  std::chrono::steady_clock::time_point start_, last_draw_;
  bool drew_ = false;
};

}  // namespace lf
