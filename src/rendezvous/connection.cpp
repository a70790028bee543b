#include "lf/rendezvous/connection.h"

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "lf/common/error.h"

namespace lf::rdzv {

namespace asio = boost::asio;

Connection::Connection(asio::ip::tcp::socket socket, uint32_t max_payload)
    : socket_(std::move(socket)), parser_(max_payload) {
  boost::system::error_code ec;
  auto ep = socket_.remote_endpoint(ec);
  if (!ec) {
    peer_ip_ = ep.address().to_string();
    peer_ = fmt::format("{}:{}", peer_ip_, ep.port());
  } else {
    peer_ = peer_ip_ = "?";
  }
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);
}

void Connection::start(MessageHandler on_message, CloseHandler on_close) {
  on_message_ = std::move(on_message);
  on_close_ = std::move(on_close);
  read_more();
}

void Connection::read_more() {
  socket_.async_read_some(asio::buffer(read_buffer_),
                          [self = shared_from_this()](boost::system::error_code ec, size_t n) {
                            if (!self->open_) return;
                            if (ec) {
                              self->finish(ec == asio::error::eof ? "connection closed by peer" : ec.message());
                              return;
                            }
                            try {
                              self->parser_.feed(std::string_view(self->read_buffer_.data(), n));
                              while (self->open_) {
                                auto frame = self->parser_.next();
                                if (!frame) break;
                                Message m = decode_message(*frame);
                                self->on_message_(std::move(m));
                              }
                            } catch (const ProtocolError& e) {
                              const std::string why = fmt::format("protocol error from {}: {}", self->peer_, e.what());
                              if (!self->refuse_protocol_errors_) return self->finish(why);
                              // No more reading: the Refused frame goes out, then the close.
                              self->send(RefusedMsg{fmt::format(
                                  "not a valid lf-train rendezvous frame ({}); this port serves an lf-train job's "
                                  "rendezvous (protocol version {})", e.what(), kProtocolVersion)});
                              self->close_why_ = why;
                              self->close_after_flush();
                              return;
                            }
                            if (self->open_) self->read_more();
                          });
}

void Connection::send(const Message& m) {
  if (!open_ || closing_) return;
  write_queue_.push_back(encode_message(m));
  queued_bytes_ += write_queue_.back().size();
  if (!writing_) write_next();
}

void Connection::write_next() {
  if (write_queue_.empty()) {
    writing_ = false;
    if (closing_) finish(close_why_);
    return;
  }
  writing_ = true;
  asio::async_write(socket_, asio::buffer(write_queue_.front()),
                    [self = shared_from_this()](boost::system::error_code ec, size_t) {
                      if (!self->open_) return;
                      self->queued_bytes_ -= self->write_queue_.front().size();
                      self->write_queue_.pop_front();
                      if (ec) {
                        self->finish(ec.message());
                        return;
                      }
                      self->write_next();
                    });
}

void Connection::close_after_flush() {
  if (!open_) return;
  closing_ = true;
  if (!writing_) finish(close_why_);
}

void Connection::close() { finish(""); }

void Connection::close(const std::string& why) { finish(why); }

void Connection::finish(const std::string& why) {
  if (!open_) return;
  open_ = false;
  boost::system::error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  write_queue_.clear();
  queued_bytes_ = 0;
  // Deferred, never from inside close(): callers may be iterating their peer tables.
  if (on_close_) asio::post(socket_.get_executor(), [handler = std::move(on_close_), why] { handler(why); });
  on_close_ = nullptr;
  on_message_ = nullptr;
}

}  // namespace lf::rdzv
