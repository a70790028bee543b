#include "lf/agent/console_writer.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

namespace lf::agent {
namespace {

// A console that has not read this much is not keeping up: further lines are dropped.
constexpr size_t kMaxQueuedBytes = 16 << 20;

void write_fully(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // console gone: keep running, the log file still gets it
    done += static_cast<size_t>(n);
  }
}

class ConsoleWriter {
 public:
  static ConsoleWriter& instance() {
    static ConsoleWriter writer;
    return writer;
  }

  void write(int fd, std::string text) {
    std::lock_guard lock(mu_);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    if (queued_bytes_ + text.size() > kMaxQueuedBytes) {
      ++dropped_[fd];
      return;
    }
    queued_bytes_ += text.size();
    queue_.emplace_back(fd, std::move(text));
    cv_.notify_all();
  }

  bool drain(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return queue_.empty() && !writing_; });
  }

  // At exit: what is queued is written while the console takes it; one that has taken
  // nothing for 5 s is left behind (the thread is blocked in write(); the process ends anyway).
  ~ConsoleWriter() {
    for (int idle_s = 0; idle_s < 5;) {
      const uint64_t before = written_;
      if (drain(std::chrono::seconds(1))) break;
      idle_s = written_ == before ? idle_s + 1 : 0;
    }
    {
      std::lock_guard lock(mu_);
      stop_ = true;
      cv_.notify_all();
    }
    if (!thread_.joinable()) return;
    if (drain(std::chrono::milliseconds(0))) thread_.join();
    else thread_.detach();
  }

 private:
  void run() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      auto [fd, text] = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
      std::string notice;
      if (auto it = dropped_.find(fd); it != dropped_.end()) {
        notice = fmt::format("[lf-train] {} console line(s) dropped: the console was not reading (--log-dir keeps "
                             "every line)\n", it->second);
        dropped_.erase(it);
      }
      lock.unlock();
      if (!notice.empty()) write_fully(fd, notice);
      write_fully(fd, text);
      lock.lock();
      writing_ = false;
      ++written_;
      queued_bytes_ -= text.size();
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<int, std::string>> queue_;
  std::map<int, size_t> dropped_;
  size_t queued_bytes_ = 0;
  bool writing_ = false, stop_ = false;
  std::atomic<uint64_t> written_ = 0;  // lines written: progress, for the wait at exit
  std::thread thread_;
};

}  // namespace

void write_to_console(int fd, std::string text) { ConsoleWriter::instance().write(fd, std::move(text)); }

bool drain_console(std::chrono::milliseconds timeout) { return ConsoleWriter::instance().drain(timeout); }

}  // namespace lf::agent
