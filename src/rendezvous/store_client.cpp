#include "lf/rendezvous/store_client.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fcntl.h>
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

#include "lf/common/env.h"
#include "lf/common/env_knobs.h"
#include "lf/common/error.h"
#include "lf/common/self_connect.h"
#include "lf/common/job_token.h"
#include "lf/rendezvous/messages.h"

namespace lf::rdzv {

using Clock = std::chrono::steady_clock;

struct StoreClient::Reply {
  StoreStatus status;
  std::string value;
  int64_t number;
};

namespace {

int remaining_ms(Clock::time_point deadline) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 1 << 30));
}

// connect() with a deadline: a host that drops SYNs would block a plain connect for the
// kernel's ~2 minutes of retries, whatever connect_timeout says.
int connect_before(int fd, const sockaddr* addr, socklen_t len, Clock::time_point deadline) {
  const int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  int rc = ::connect(fd, addr, len);
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    int ready;
    do {
      ready = ::poll(&p, 1, remaining_ms(deadline));
    } while (ready < 0 && errno == EINTR);
    int err = ETIMEDOUT;
    socklen_t err_len = sizeof err;
    if (ready > 0) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len);
    rc = err == 0 ? 0 : -1;
    errno = err;
  }
  const int saved = errno;
  ::fcntl(fd, F_SETFL, flags);
  errno = saved;
  return rc;
}

int connect_once(const std::string& host, uint16_t port, std::string* error, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) {
    *error = fmt::format("cannot resolve '{}': {}", host, gai_strerror(rc));
    return -1;
  }
  int fd = -1;
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    if (connect_before(fd, ai->ai_addr, ai->ai_addrlen, deadline) == 0) {
      if (!connected_to_itself(fd)) break;
      errno = ECONNREFUSED;  // nothing listens yet (lf/common/self_connect.h)
    }
    *error = std::strerror(errno);
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(res);
  if (fd >= 0) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  return fd;
}

}  // namespace

StoreClient::StoreClient(const std::string& host, uint16_t port, const std::string& job_id, const std::string& token,
                         std::chrono::milliseconds connect_timeout)
    : endpoint_(fmt::format("{}:{}", host, port)) {
  auto deadline = Clock::now() + connect_timeout;
  std::string error;
  auto backoff = std::chrono::milliseconds(50);
  while ((fd_ = connect_once(host, port, &error, deadline)) < 0) {
    LF_CHECK(Clock::now() + backoff < deadline, NetworkError,
             "cannot reach the lf-train store at {} within {} ms: {}. Is the rendezvous server (node 0's "
             "lf-train) running and reachable?", endpoint_, connect_timeout.count(), error);
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
  send_all(encode_message(StoreHelloMsg{job_id, token}), deadline);
}

StoreClient StoreClient::from_env() {
  auto addr = knob_string("LF_RDZV_ADDR");
  auto port = knob_int("LF_RDZV_PORT");
  LF_CHECK(addr && port, ConfigError,
           "LF_RDZV_ADDR / LF_RDZV_PORT are not set: run this program under `lf-train launch`");
  return StoreClient(*addr, static_cast<uint16_t>(*port), env_string("TORCHELASTIC_RUN_ID").value_or("none"),
                     job_token_from_env());
}

std::unique_ptr<StoreClient> StoreClient::connect_from_env() {
  auto addr = knob_string("LF_RDZV_ADDR");
  auto port = knob_int("LF_RDZV_PORT");
  LF_CHECK(addr && port, ConfigError,
           "LF_RDZV_ADDR / LF_RDZV_PORT are not set: run this program under `lf-train launch`");
  return std::make_unique<StoreClient>(*addr, static_cast<uint16_t>(*port),
                                       env_string("TORCHELASTIC_RUN_ID").value_or("none"),
                                       job_token_from_env());
}

StoreClient::~StoreClient() {
  if (fd_ >= 0) ::close(fd_);
}

void StoreClient::send_all(const std::string& bytes, Clock::time_point deadline) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    pollfd p{fd_, POLLOUT, 0};
    int rc = ::poll(&p, 1, remaining_ms(deadline));
    LF_CHECK(rc != 0, TimeoutError, "store {}: send timed out", endpoint_);
    if (rc < 0 && errno == EINTR) continue;
    ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    LF_CHECK(n > 0, NetworkError, "store {}: send failed: {}", endpoint_, std::strerror(errno));
    sent += static_cast<size_t>(n);
  }
}

std::optional<Frame> StoreClient::read_frame(Clock::time_point deadline) {
  char buf[4096];
  for (;;) {
    if (auto f = parser_.next()) return f;
    pollfd p{fd_, POLLIN, 0};
    int rc = ::poll(&p, 1, remaining_ms(deadline));
    if (rc == 0) return std::nullopt;
    if (rc < 0 && errno == EINTR) continue;
    ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    LF_CHECK(n > 0, NetworkError, "store {}: connection closed ({})", endpoint_,
             n == 0 ? "server gone" : std::strerror(errno));
    parser_.feed(std::string_view(buf, static_cast<size_t>(n)));
  }
}

StoreClient::Reply StoreClient::request(uint8_t op, std::vector<std::string> keys, std::string value,
                                        std::string expected, int64_t number, std::chrono::milliseconds timeout) {
  StoreRequestMsg req;
  req.request_id = next_request_++;
  req.op = static_cast<StoreOp>(op);
  req.keys = std::move(keys);
  req.value = std::move(value);
  req.expected = std::move(expected);
  req.number = number;
  req.timeout_ms = timeout.count();
  // The server answers a wait at its own deadline; allow for the round trip.
  auto deadline = Clock::now() + std::max(timeout, request_timeout) + std::chrono::seconds(5);
  send_all(encode_message(req), deadline);
  for (;;) {
    auto frame = read_frame(deadline);
    LF_CHECK(frame, TimeoutError, "store {}: no reply within {} ms", endpoint_,
             std::chrono::duration_cast<std::chrono::milliseconds>(std::max(timeout, request_timeout)).count());
    Message m = decode_message(*frame);
    if (auto* refused = std::get_if<RefusedMsg>(&m)) LF_THROW(RendezvousError, "store {}: {}", endpoint_, refused->reason);
    auto* reply = std::get_if<StoreReplyMsg>(&m);
    if (!reply || reply->request_id != req.request_id) continue;  // heartbeats or stale replies
    LF_CHECK(reply->status != StoreStatus::kError, RendezvousError, "store {}: {}", endpoint_, reply->value);
    return Reply{reply->status, std::move(reply->value), reply->number};
  }
}

std::string StoreClient::local_address() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  LF_CHECK(::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) == 0, NetworkError, "getsockname: {}",
           std::strerror(errno));
  char host[NI_MAXHOST] = {};
  ::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof(host), nullptr, 0, NI_NUMERICHOST);
  return host;
}

void StoreClient::set(const std::string& key, const std::string& value) {
  request(static_cast<uint8_t>(StoreOp::kSet), {key}, value, "", 0, request_timeout);
}

std::optional<std::string> StoreClient::get(const std::string& key) {
  auto r = request(static_cast<uint8_t>(StoreOp::kGet), {key}, "", "", 0, request_timeout);
  if (r.status == StoreStatus::kNotFound) return std::nullopt;
  return r.value;
}

int64_t StoreClient::add(const std::string& key, int64_t delta) {
  return request(static_cast<uint8_t>(StoreOp::kAdd), {key}, "", "", delta, request_timeout).number;
}

std::string StoreClient::compare_set(const std::string& key, const std::string& expected, const std::string& desired) {
  return request(static_cast<uint8_t>(StoreOp::kCompareSet), {key}, desired, expected, 0, request_timeout).value;
}

bool StoreClient::erase(const std::string& key) {
  return request(static_cast<uint8_t>(StoreOp::kDelete), {key}, "", "", 0, request_timeout).status == StoreStatus::kOk;
}

void StoreClient::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  auto r = request(static_cast<uint8_t>(StoreOp::kWait), keys, "", "", 0, timeout);
  LF_CHECK(r.status == StoreStatus::kOk, TimeoutError, "store {}: keys [{}] did not all appear within {} ms",
           endpoint_, fmt::join(keys, ", "), timeout.count());
}

void StoreClient::barrier(const std::string& name, int64_t count, std::chrono::milliseconds timeout) {
  auto r = request(static_cast<uint8_t>(StoreOp::kBarrier), {name}, "", "", count, timeout);
  LF_CHECK(r.status == StoreStatus::kOk, TimeoutError, "store {}: barrier '{}' did not reach {} participants in {} ms",
           endpoint_, name, count, timeout.count());
}

}  // namespace lf::rdzv
