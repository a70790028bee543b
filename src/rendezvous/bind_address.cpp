#include "lf/rendezvous/bind_address.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <optional>

#include "lf/common/error.h"

namespace lf::rdzv {

namespace {

std::string ip_text(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  const void* raw = sa->sa_family == AF_INET ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(sa)->sin_addr)
                                             : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
  ::inet_ntop(sa->sa_family, raw, buf, sizeof buf);
  return buf;
}

// The first address `host` resolves to that a socket can be bound to here (port 0), IPv4 before
// IPv6; the first one it resolves to at all in *seen.
std::optional<std::string> first_local_address(const std::string& host, std::string* seen) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &list);
  LF_CHECK(rc == 0, ConfigError, "MASTER_ADDR={} does not resolve on this host ({}): node 0 hosts the rendezvous "
           "server on that address; give node 0's IP address or a name its resolver knows", host, ::gai_strerror(rc));
  // IPv4 first (`localhost` often lists ::1 first): the server listened on 0.0.0.0 before, and
  // every client that reached it then reaches it now.
  std::optional<std::string> found;
  for (const int family : {AF_INET, AF_INET6})
    for (const addrinfo* a = list; a && !found; a = a->ai_next) {
      if (a->ai_family != family) continue;
      if (seen->empty()) *seen = ip_text(a->ai_addr);
      const int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) continue;
      if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0) found = ip_text(a->ai_addr);
      ::close(fd);
    }
  ::freeaddrinfo(list);
  return found;
}

bool names_loopback(const std::string& host) {
  return host == "localhost" || host == "localhost.localdomain" || is_loopback_ip(host);
}

}  // namespace

bool is_loopback_ip(const std::string& ip) { return ip.rfind("127.", 0) == 0 || ip == "::1"; }

BindChoice choose_bind_address(const std::string& master_addr, int64_t max_nodes, bool bind_all) {
  if (bind_all)
    return {"0.0.0.0", "every address, --rdzv-bind-all: whoever reaches this port may try to join; a job token "
                       "(LF_JOB_TOKEN) keeps strangers out"};
  std::string seen;
  const auto local = first_local_address(master_addr, &seen);
  LF_CHECK(local, ConfigError,
           "MASTER_ADDR={} resolves to {}, which is not an address of this host, but this node (node 0) hosts the "
           "rendezvous server and listens on MASTER_ADDR: run node 0 on that host, give its own address as "
           "MASTER_ADDR, or --rdzv-bind-all to listen on every address (behind NAT or a load balancer)",
           master_addr, seen);
  if (is_loopback_ip(*local) && max_nodes > 1 && !names_loopback(master_addr))
    return {"0.0.0.0",
            fmt::format("every address: MASTER_ADDR={} resolves to {} on this host (an /etc/hosts line?), which the "
                        "other nodes cannot reach, and the address they reach is unknown here; a job token "
                        "(LF_JOB_TOKEN) keeps strangers out", master_addr, *local)};
  return {*local, fmt::format("MASTER_ADDR={}, that address only; --rdzv-bind-all listens on every one", master_addr)};
}

}  // namespace lf::rdzv
