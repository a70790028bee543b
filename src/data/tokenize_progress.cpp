#include "tokenize_progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "lf/common/log.h"

namespace lf {

namespace {

std::string seconds_text(double s) { return s < 60 ? fmt::format("{:.0f} s", s) : fmt::format("{:.1f} min", s / 60); }

}  // namespace

TokenizeProgress::TokenizeProgress(size_t total, std::string what)
    : total_(total), what_(std::move(what)), enabled_(total >= kMinExamples), tty_(::isatty(2) == 1),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

TokenizeProgress::~TokenizeProgress() {
  if (drew_) std::fputs("\n", stderr);
}

void TokenizeProgress::tick() {
  if (!enabled_) return;
  const size_t done = done_.fetch_add(1, std::memory_order_relaxed) + 1;
  // Cheap test first: a decile crossed, or (terminal) every 1/200th.
  const size_t step = tty_ ? std::max<size_t>(1, total_ / 200) : std::max<size_t>(1, total_ / 10);
  if (done % step != 0 && done != total_) return;
  report(done);
}

void TokenizeProgress::report(size_t done) {
  std::lock_guard lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double fraction = static_cast<double>(done) / static_cast<double>(total_);
  const double left = fraction > 0 ? elapsed * (1 - fraction) / fraction : 0;
  if (tty_) {
    if (done != total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(fraction * kWidth);
    std::fprintf(stderr, "\r%s [%s%s] %3.0f%% %zu/%zu examples, %s left   ", what_.c_str(),
                 std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(kWidth - filled), ' ').c_str(), fraction * 100, done, total_,
                 seconds_text(left).c_str());
    std::fflush(stderr);
    drew_ = true;
    return;
  }
  const int decile = static_cast<int>(fraction * 10 + 1e-9);
  if (decile <= last_decile_) return;
  last_decile_ = decile;
  spdlog::info("{}: {}% ({} of {} examples, {} so far{})", what_, decile * 10, done, total_, seconds_text(elapsed),
               done == total_ ? "" : ", about " + seconds_text(left) + " left");
}

}  // namespace lf
