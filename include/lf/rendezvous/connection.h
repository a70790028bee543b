#pragma once
// One framed TCP connection (server side or agent side). Reads frames into
// Messages and hands them to a handler; queues writes so at most one
// async_write is in flight. Threading: all calls on the io_context's thread.
// Ownership: shared_ptr; the read loop keeps it alive until the socket closes.
#include <boost/asio/ip/tcp.hpp>

#include <array>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "lf/rendezvous/messages.h"

namespace lf::rdzv {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using MessageHandler = std::function<void(Message&&)>;
  // Called once, when the connection ends for any reason (peer closed, error,
  // protocol violation, close()), always from a fresh io handler (never from
  // inside close()). `why` is empty for a local close().
  using CloseHandler = std::function<void(const std::string& why)>;

  Connection(boost::asio::ip::tcp::socket socket, uint32_t max_payload);
  void start(MessageHandler on_message, CloseHandler on_close);
  void send(const Message& m);
  // Sends what is queued, then closes (used after Refused / Finished).
  void close_after_flush();
  void close();
  // As close(), with `why` handed to the close handler (e.g. "missed heartbeats: ...").
  void close(const std::string& why);
  // Server side: a protocol error (garbage, a foreign protocol version, an oversized frame)
  // is answered with a Refused frame naming it before the connection closes, so whoever
  // connected learns why instead of seeing a reset.
  void refuse_protocol_errors() { refuse_protocol_errors_ = true; }
  bool is_open() const { return open_; }
  // "ip:port" of the peer (captured at construction; survives close).
  const std::string& peer() const { return peer_; }
  const std::string& peer_ip() const { return peer_ip_; }
  size_t queued_bytes() const { return queued_bytes_; }

 private:
  void read_more();
  void write_next();
  void finish(const std::string& why);

  boost::asio::ip::tcp::socket socket_;
  FrameParser parser_;
  // Small on purpose: the server holds one per agent (thousands of them).
  std::array<char, 2048> read_buffer_;
  std::deque<std::string> write_queue_;
  size_t queued_bytes_ = 0;
  bool writing_ = false;
  bool closing_ = false;
  bool open_ = true;
  bool refuse_protocol_errors_ = false;
  std::string close_why_;  // given to the close handler once a close_after_flush() ends
  std::string peer_, peer_ip_;
  MessageHandler on_message_;
  CloseHandler on_close_;
};

}  // namespace lf::rdzv
