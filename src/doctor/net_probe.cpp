#include "lf/doctor/net_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lf/doctor/doctor.h"

namespace lf::doctor {

namespace {

std::string address_text(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof(buf));
  else ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof(buf));
  return buf;
}

// The socket inodes listening on `port` (state 0A) in /proc/net/tcp{,6}.
std::vector<std::string> listening_inodes(uint16_t port, const std::string& proc_root) {
  std::vector<std::string> out;
  for (const char* f : {"/net/tcp", "/net/tcp6"}) {
    std::ifstream in(proc_root + f);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream ss(line);
      std::string sl, local, remote, state, queues, timer, retr, uid, timeout, inode;
      ss >> sl >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
      const auto colon = local.rfind(':');
      if (colon == std::string::npos || state != "0A") continue;
      if (std::stoul(local.substr(colon + 1), nullptr, 16) == port) out.push_back(inode);
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> resolve(const std::string& host, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::vector<std::string> out;
  if (const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res); rc != 0) {
    if (error) *error = ::gai_strerror(rc);
    return out;
  }
  for (auto* a = res; a; a = a->ai_next) {
    const auto s = address_text(a->ai_addr);
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  }
  ::freeaddrinfo(res);
  return out;
}

ConnectOutcome tcp_connect(const std::string& host, uint16_t port, double timeout_s) {
  ConnectOutcome o;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0) {
    o.result = ConnectResult::kUnresolved;
    o.error = ::gai_strerror(rc);
    return o;
  }
  o.address = address_text(res->ai_addr);
  const int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int rc = ::connect(fd, res->ai_addr, res->ai_addrlen);
  ::freeaddrinfo(res);
  int err = rc == 0 ? 0 : errno;
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, static_cast<int>(timeout_s * 1000)) <= 0) {
      err = ETIMEDOUT;
    } else {
      socklen_t len = sizeof(err);
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    }
  }
  ::close(fd);
  o.error = err ? std::strerror(err) : "";
  if (err == 0) o.result = ConnectResult::kConnected;
  else if (err == ECONNREFUSED) o.result = ConnectResult::kRefused;
  else if (err == ETIMEDOUT) o.result = ConnectResult::kTimeout;
  else o.result = ConnectResult::kUnreachable;
  return o;
}

bool can_bind(uint16_t port, std::string* error) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // as the rendezvous server binds
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && ::listen(fd, 1) == 0;
  if (!ok && error) *error = std::strerror(errno);
  ::close(fd);
  return ok;
}

std::string port_owner(uint16_t port, const std::string& proc_root) {
  const auto inodes = listening_inodes(port, proc_root);
  if (inodes.empty()) return "";
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(proc_root, ec); !ec && it != std::filesystem::end(it);
       it.increment(ec)) {
    const std::string pid = it->path().filename().string();
    if (pid.empty() || !std::isdigit(static_cast<unsigned char>(pid[0]))) continue;
    std::error_code fec;
    for (auto fd = std::filesystem::directory_iterator(it->path() / "fd", fec); !fec && fd != std::filesystem::end(fd);
         fd.increment(fec)) {
      std::error_code lec;
      const auto target = std::filesystem::read_symlink(fd->path(), lec).string();
      for (const auto& inode : inodes)
        if (!lec && target == "socket:[" + inode + "]") {
          std::ifstream comm(it->path() / "comm");
          std::string name;
          std::getline(comm, name);
          return fmt::format("pid {} ({})", pid, name);
        }
    }
  }
  return "";
}

bool is_local_address(const std::string& host) {
  std::string ignored;
  for (const auto& a : resolve(host, &ignored)) {
    sockaddr_storage ss{};
    socklen_t len = 0;
    if (a.find(':') == std::string::npos) {
      auto* s4 = reinterpret_cast<sockaddr_in*>(&ss);
      s4->sin_family = AF_INET;
      ::inet_pton(AF_INET, a.c_str(), &s4->sin_addr);
      len = sizeof(sockaddr_in);
    } else {
      auto* s6 = reinterpret_cast<sockaddr_in6*>(&ss);
      s6->sin6_family = AF_INET6;
      ::inet_pton(AF_INET6, a.c_str(), &s6->sin6_addr);
      len = sizeof(sockaddr_in6);
    }
    const int fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0;  // port 0: any
    if (fd >= 0) ::close(fd);
    if (ok) return true;
  }
  return false;
}

}  // namespace lf::doctor
