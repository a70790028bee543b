#include "tcp_mesh.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "lf/common/error.h"
#include "lf/rendezvous/store_client.h"

namespace lf::comm {

using Clock = std::chrono::steady_clock;

namespace {

int remaining_ms(Clock::time_point deadline) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 1 << 30));
}

void tune(int fd) {
  int one = 1, buf = 4 << 20;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
}

void write_all_blocking(int fd, const void* data, size_t n) {
  auto* p = static_cast<const char*>(data);
  while (n) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    LF_CHECK(w > 0, BackendError, "comm handshake send failed: {}", std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void read_all_blocking(int fd, void* data, size_t n) {
  auto* p = static_cast<char*>(data);
  while (n) {
    ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    LF_CHECK(r > 0, BackendError, "comm handshake recv failed: {}", r == 0 ? "peer closed" : std::strerror(errno));
    p += r;
    n -= static_cast<size_t>(r);
  }
}

int connect_to(const std::string& addr, Clock::time_point deadline) {
  auto colon = addr.rfind(':');
  std::string host = addr.substr(0, colon), port = addr.substr(colon + 1);
  for (auto backoff = std::chrono::milliseconds(10);; backoff = std::min(backoff * 2, std::chrono::milliseconds(500))) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int fd = -1;
    if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &res) == 0) {
      fd = ::socket(res->ai_family, SOCK_STREAM, 0);
      if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
        ::close(fd);
        fd = -1;
      }
      ::freeaddrinfo(res);
    }
    if (fd >= 0) return fd;
    LF_CHECK(Clock::now() + backoff < deadline, BackendError, "cannot connect to peer {}: {}", addr, std::strerror(errno));
    std::this_thread::sleep_for(backoff);
  }
}

}  // namespace

TcpMesh::TcpMesh(rdzv::StoreClient& store, const std::string& prefix, int rank, int world,
                 std::chrono::milliseconds timeout)
    : rank_(rank), world_(world), timeout_(timeout), fds_(world, -1) {
  auto deadline = Clock::now() + timeout;
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  LF_CHECK(listener >= 0, BackendError, "socket: {}", std::strerror(errno));
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(any);
  LF_CHECK(::bind(listener, reinterpret_cast<sockaddr*>(&any), sizeof(any)) == 0 && ::listen(listener, world) == 0 &&
               ::getsockname(listener, reinterpret_cast<sockaddr*>(&any), &len) == 0,
           BackendError, "rank {}: cannot listen for peers: {}", rank, std::strerror(errno));
  std::string me = fmt::format("{}:{}", store.local_address(), ntohs(any.sin_port));
  store.set(fmt::format("{}/addr/{}", prefix, rank), me);
  std::vector<std::string> keys;
  for (int r = 0; r < world; ++r) keys.push_back(fmt::format("{}/addr/{}", prefix, r));
  store.wait(keys, timeout);

  for (int peer = 0; peer < rank; ++peer) {
    int fd = connect_to(*store.get(keys[peer]), deadline);
    int32_t hello = rank;
    write_all_blocking(fd, &hello, sizeof(hello));
    tune(fd);
    fds_[peer] = fd;
  }
  for (int accepted = 0; accepted < world - 1 - rank; ++accepted) {
    pollfd p{listener, POLLIN, 0};
    LF_CHECK(::poll(&p, 1, remaining_ms(deadline)) == 1, TimeoutError,
             "rank {}: {} higher rank(s) did not connect within {} ms", rank, world - 1 - rank - accepted,
             timeout.count());
    int fd = ::accept(listener, nullptr, nullptr);
    LF_CHECK(fd >= 0, BackendError, "accept: {}", std::strerror(errno));
    int32_t peer = -1;
    read_all_blocking(fd, &peer, sizeof(peer));
    LF_CHECK(peer > rank && peer < world && fds_[peer] < 0, BackendError, "rank {}: unexpected hello from rank {}", rank,
             peer);
    tune(fd);
    fds_[peer] = fd;
  }
  ::close(listener);
  for (int fd : fds_)
    if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

TcpMesh::~TcpMesh() {
  for (int fd : fds_)
    if (fd >= 0) ::close(fd);
}

void TcpMesh::shutdown() {
  for (int fd : fds_)
    if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
}

void TcpMesh::send_recv(int to, const void* send_data, size_t send_bytes, int from, void* recv_data,
                        size_t recv_bytes) {
  auto deadline = Clock::now() + timeout_;
  auto* out = static_cast<const char*>(send_data);
  auto* in = static_cast<char*>(recv_data);
  size_t sent = 0, got = 0;
  while (sent < send_bytes || got < recv_bytes) {
    pollfd p[2];
    int n = 0, out_i = -1, in_i = -1;
    if (sent < send_bytes) {
      p[n] = {fds_[to], POLLOUT, 0};
      out_i = n++;
    }
    if (got < recv_bytes) {
      if (out_i >= 0 && fds_[from] == fds_[to]) {
        p[out_i].events |= POLLIN;
        in_i = out_i;
      } else {
        p[n] = {fds_[from], POLLIN, 0};
        in_i = n++;
      }
    }
    int rc = ::poll(p, n, remaining_ms(deadline));
    if (rc < 0 && errno == EINTR) continue;
    LF_CHECK(rc > 0, TimeoutError, "rank {}: transfer with ranks {}/{} made no progress for {} ms", rank_, to, from,
             timeout_.count());
    if (out_i >= 0 && (p[out_i].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t w = ::send(fds_[to], out + sent, send_bytes - sent, MSG_NOSIGNAL);
      if (w < 0 && (errno == EAGAIN || errno == EINTR)) w = 0;
      LF_CHECK(w >= 0, BackendError, "rank {}: send to rank {} failed: {}", rank_, to, std::strerror(errno));
      sent += static_cast<size_t>(w);
    }
    if (in_i >= 0 && (p[in_i].revents & (POLLIN | POLLERR | POLLHUP))) {
      ssize_t r = ::recv(fds_[from], in + got, recv_bytes - got, 0);
      if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      LF_CHECK(r > 0, BackendError, "rank {}: connection to rank {} lost ({})", rank_, from,
               r == 0 ? "peer closed" : std::strerror(errno));
      got += static_cast<size_t>(r);
    }
  }
}

void TcpMesh::send(int to, const void* data, size_t bytes) { send_recv(to, data, bytes, to, nullptr, 0); }
void TcpMesh::recv(int from, void* data, size_t bytes) { send_recv(from, nullptr, 0, from, data, bytes); }

}  // namespace lf::comm
