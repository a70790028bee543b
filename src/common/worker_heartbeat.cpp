#include "lf/common/worker_heartbeat.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "lf/common/env_knobs.h"

namespace lf {

namespace {

// The channel to the agent. Never destroyed: the liveness thread may beat while the
// process runs its exit handlers.
class Channel {
 public:
  static Channel& get() {
    static Channel* channel = new Channel;
    return *channel;
  }

  bool open() const { return fd_ >= 0; }

  // A progress beat waits up to `patience` for room (the agent reads at once; it lags only
  // when its io thread is busy): losing one could leave the agent holding an old, shorter
  // deadline. A liveness beat gives up at once: the next one follows within a second.
  void write_line(const std::string& line, std::chrono::milliseconds patience) {
    if (fd_ < 0) return;
    std::lock_guard lock(mu_);
    // A line left half-written ends with a newline of its own first: the agent then reads one
    // bad line (liveness) instead of gluing two together.
    std::string out = torn_ ? "\n" + line : line;
    const auto deadline = std::chrono::steady_clock::now() + patience;
    size_t sent = 0;
    while (sent < out.size()) {
      // MSG_NOSIGNAL: the agent may be gone (it then kills us anyway); never SIGPIPE.
      const ssize_t w = ::send(fd_, out.data() + sent, out.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w > 0) {
        sent += static_cast<size_t>(w);
        continue;
      }
      if (w < 0 && errno == EINTR) continue;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                              std::chrono::steady_clock::now());
      pollfd p{fd_, POLLOUT, 0};
      if (w == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) || left.count() <= 0 ||
          ::poll(&p, 1, static_cast<int>(left.count())) <= 0)
        break;
    }
    if (sent == out.size()) torn_ = false;
    else if (sent > 0) torn_ = true;  // (nothing sent: an earlier tear, if any, still stands)
  }

 private:
  Channel() {
    fd_ = static_cast<int>(knob_int("LF_HEARTBEAT_FD").value_or(-1));
  }
  int fd_ = -1;
  std::mutex mu_;
  bool torn_ = false;
};

}  // namespace

bool heartbeat_channel_open() { return Channel::get().open(); }

void worker_heartbeat() { Channel::get().write_line(alive_line(), std::chrono::milliseconds(0)); }

void worker_progress(WorkerPhase phase, int64_t step, double deadline_s, std::string_view metrics_json) {
  auto& channel = Channel::get();
  if (!channel.open()) return;
  channel.write_line(progress_line(phase, step, deadline_s, metrics_json), std::chrono::seconds(2));
}

void start_worker_liveness(double interval_s) {
  static std::once_flag once;
  std::call_once(once, [interval_s] {
    if (!heartbeat_channel_open()) return;
    const auto every = std::chrono::milliseconds(static_cast<int64_t>(std::max(interval_s, 0.01) * 1000));
    std::thread([every] {
      for (;;) {
        worker_heartbeat();
        std::this_thread::sleep_for(every);
      }
    }).detach();
  });
}

}  // namespace lf
