#include "lf/metrics/http_server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <list>

#include "lf/common/error.h"

namespace lf::metrics {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr auto kReadDeadline = std::chrono::seconds(30);  // an idle keep-alive connection
constexpr auto kWriteDeadline = std::chrono::seconds(10);

}  // namespace

std::string HttpRequest::query_value(const std::string& name) const {
  size_t pos = 0;
  while (pos <= query.size()) {
    const size_t amp = query.find('&', pos);
    const std::string_view part = std::string_view(query).substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
    if (part.size() > name.size() && part.substr(0, name.size()) == name && part[name.size()] == '=')
      return std::string(part.substr(name.size() + 1));
    if (amp == std::string::npos) break;
    pos = amp + 1;
  }
  return "";
}

bool is_loopback_address(const std::string& host) {
  beast::error_code ec;
  const auto a = asio::ip::make_address(host, ec);
  return !ec && a.is_loopback();
}

struct HttpServer::Impl : std::enable_shared_from_this<Impl> {
  struct Session : std::enable_shared_from_this<Session> {
    Session(std::shared_ptr<Impl> server, tcp::socket socket) : server(std::move(server)), stream(std::move(socket)) {}
    std::shared_ptr<Impl> server;
    beast::tcp_stream stream;
    beast::flat_buffer buffer;
    http::request<http::string_body> request;
    http::response<http::string_body> response;
    std::list<std::weak_ptr<Session>>::iterator self_in_list;
    bool listed = false;

    void read() {
      request = {};
      stream.expires_after(kReadDeadline);
      http::async_read(stream, buffer, request, [self = shared_from_this()](beast::error_code ec, size_t) {
        if (ec) return self->close();
        self->answer();
      });
    }

    HttpReply route() {
      const bool head = request.method() == http::verb::head;
      if (request.method() != http::verb::get && !head) return {405, "text/plain; charset=utf-8", "only GET is served\n", {}};
      HttpRequest r;
      r.target = std::string(request.target());
      const size_t q = r.target.find('?');
      r.path = r.target.substr(0, q);
      r.query = q == std::string::npos ? "" : r.target.substr(q + 1);
      r.authorization = std::string(request[http::field::authorization]);
      r.head = head;
      ++server->requests;
      return server->handler(r);
    }

    void answer() {
      HttpReply reply = route();
      response = {};
      response.version(request.version());
      response.keep_alive(request.keep_alive());
      response.result(static_cast<http::status>(reply.status));
      response.set(http::field::server, "lf-train");
      response.set(http::field::content_type, reply.content_type);
      for (const auto& [name, value] : reply.headers) response.set(name, value);
      if (request.method() != http::verb::head) response.body() = std::move(reply.body);
      response.prepare_payload();
      stream.expires_after(kWriteDeadline);
      http::async_write(stream, response, [self = shared_from_this()](beast::error_code ec, size_t) {
        if (ec || !self->response.keep_alive()) return self->close();
        self->read();
      });
    }

    void close() {
      beast::error_code ignored;
      stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
      stream.close();
      if (server->closed || !listed) return;
      listed = false;
      server->sessions.erase(self_in_list);
    }
  };

  Impl(asio::io_context& io, Handler h) : io(io), acceptor(io), handler(std::move(h)) {}

  void accept() {
    acceptor.async_accept([self = shared_from_this()](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !self->acceptor.is_open()) return;
      if (!ec) {
        if (self->sessions.size() >= static_cast<size_t>(kMaxConnections)) {
          beast::error_code ignored;
          socket.close(ignored);
        } else {
          auto s = std::make_shared<Session>(self, std::move(socket));
          self->sessions.push_front(s);
          s->self_in_list = self->sessions.begin();
          s->listed = true;
          s->read();
        }
      } else {
        spdlog::debug("{}: accept failed: {}", self->what, ec.message());
      }
      self->accept();
    });
  }

  asio::io_context& io;
  tcp::acceptor acceptor;
  Handler handler;
  std::string what, port_hint, addr_hint;
  std::list<std::weak_ptr<Session>> sessions;
  uint64_t requests = 0;
  bool closed = false;
};

HttpServer::HttpServer(asio::io_context& io, Handler handler, std::string what, std::string port_hint,
                       std::string addr_hint)
    : impl_(std::make_shared<Impl>(io, std::move(handler))) {
  impl_->what = std::move(what);
  impl_->port_hint = std::move(port_hint);
  impl_->addr_hint = std::move(addr_hint);
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start(const std::string& host, uint16_t port) {
  beast::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  LF_CHECK(!ec, ConfigError, "{} '{}' is not an IP address (expected e.g. 0.0.0.0 or 127.0.0.1)", impl_->addr_hint,
           host);
  const tcp::endpoint ep(address, port);
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  LF_CHECK(!ec, NetworkError, "{} cannot listen on {}:{}: {}. {}", impl_->what, host, port, ec.message(),
           ec == asio::error::address_in_use ? "Another process uses that port: " + impl_->port_hint
                                             : "Check " + impl_->addr_hint);
  impl_->accept();
}

uint16_t HttpServer::port() const {
  beast::error_code ec;
  const auto ep = impl_->acceptor.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

void HttpServer::stop() {
  if (impl_->closed) return;
  impl_->closed = true;
  beast::error_code ignored;
  impl_->acceptor.close(ignored);
  for (auto& w : impl_->sessions)
    if (auto s = w.lock()) s->stream.close();
  impl_->sessions.clear();
}

uint64_t HttpServer::requests() const { return impl_->requests; }

}  // namespace lf::metrics
