#include "lf/common/worker_heartbeat.h"

#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "lf/common/env_knobs.h"

namespace lf {

void worker_heartbeat(std::string_view progress) {
  static const int fd = static_cast<int>(knob_int("LF_HEARTBEAT_FD").value_or(-1));
  if (fd < 0) return;
  std::string line(progress.empty() ? std::string_view("alive") : progress);
  line.push_back('\n');
  // The agent may be gone (it then kills us anyway): ignore errors, never block on SIGPIPE.
  ssize_t ignored = ::send(fd, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)ignored;
}

}  // namespace lf
