#pragma once
// A test peer of the rendezvous server: one blocking TCP connection that speaks the frames as an
// agent (or a stranger) would, with a deadline on every read (tests/rendezvous, tests/ui).
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>

#include "lf/rendezvous/messages.h"

namespace lf::rdzv::test {

using namespace std::chrono_literals;

// One TCP connection to the server, blocking, with deadlines on every read.
class RawPeer {
 public:
  explicit RawPeer(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) throw std::runtime_error("connect failed");
  }
  ~RawPeer() { ::close(fd_); }
  void send(const Message& m) { send_bytes(encode_message(m)); }
  void send_bytes(const std::string& b) { (void)!::write(fd_, b.data(), b.size()); }

  // The next message other than heartbeats and waiting lines; nullopt when the connection
  // closed or `within` passed. Answers heartbeats while it waits, as an agent does.
  std::optional<Message> next(std::chrono::milliseconds within = 5000ms) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (true) {
      while (auto f = parser_.next()) {
        Message m = decode_message(*f);
        if (std::holds_alternative<HeartbeatMsg>(m) || std::holds_alternative<WaitingMsg>(m)) {
          if (heartbeat_) send(HeartbeatMsg{});
          continue;
        }
        return m;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left <= 0ms || closed_) return std::nullopt;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) != 1) continue;
      char buf[4096];
      const ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n <= 0) closed_ = true;
      else parser_.feed(std::string_view(buf, static_cast<size_t>(n)));
    }
  }
  template <typename T>
  std::optional<T> expect(std::chrono::milliseconds within = 5000ms) {
    auto m = next(within);
    if (!m || !std::holds_alternative<T>(*m)) return std::nullopt;
    return std::get<T>(*m);
  }
  void stop_heartbeats() { heartbeat_ = false; }

 private:
  int fd_ = -1;
  FrameParser parser_;
  bool closed_ = false, heartbeat_ = true;
};

}  // namespace lf::rdzv::test
