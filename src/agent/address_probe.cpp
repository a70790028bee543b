#include "lf/agent/address_probe.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <thread>

#include "lf/common/self_connect.h"

namespace lf::agent {

namespace {

using Clock = std::chrono::steady_clock;

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list) ::freeaddrinfo(list);
  }
};

bool resolve(const std::string& host, const char* service, AddrInfo& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  return ::getaddrinfo(host.c_str(), service, &hints, &out.list) == 0;
}

// One non-blocking connect, waited for at most `budget`.
bool connects(const addrinfo* a, std::chrono::milliseconds budget) {
  const int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return false;
  bool ok = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0;
  if (!ok && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, static_cast<int>(budget.count())) == 1) {
      int err = 0;
      socklen_t len = sizeof(err);
      ok = ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
    }
  }
  ok = ok && !connected_to_itself(fd);  // no server: the dial met itself (lf/common/self_connect.h)
  ::close(fd);
  return ok;
}

}  // namespace

bool is_local_address(const std::string& host) {
  AddrInfo ai;
  if (!resolve(host, nullptr, ai)) return false;
  for (const addrinfo* a = ai.list; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    // Port 0: the bind succeeds only for an address this host has (EADDRNOTAVAIL otherwise).
    const bool local = ::bind(fd, a->ai_addr, a->ai_addrlen) == 0;
    ::close(fd);
    if (local) return true;
  }
  return false;
}

bool server_answers(const std::string& host, uint16_t port, std::chrono::milliseconds wait) {
  AddrInfo ai;
  if (!resolve(host, std::to_string(port).c_str(), ai)) return false;
  const auto deadline = Clock::now() + wait;
  while (true) {
    for (const addrinfo* a = ai.list; a; a = a->ai_next) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (connects(a, std::max(left, std::chrono::milliseconds(1)))) return true;
    }
    if (Clock::now() + std::chrono::milliseconds(100) > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace lf::agent
