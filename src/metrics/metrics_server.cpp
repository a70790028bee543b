#include "lf/metrics/metrics_server.h"

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
constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace

struct MetricsServer::Impl : std::enable_shared_from_this<Impl> {
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

    void answer() {
      response = {};
      response.version(request.version());
      response.keep_alive(request.keep_alive());
      response.set(http::field::server, "lf-train");
      const auto target = request.target();
      const bool get = request.method() == http::verb::get || request.method() == http::verb::head;
      if (get && (target == "/metrics" || target.starts_with("/metrics?"))) {
        response.result(http::status::ok);
        response.set(http::field::content_type, kContentType);
        if (request.method() == http::verb::get) response.body() = server->handler();
        ++server->scrapes;
      } else if (get && target == "/") {
        response.result(http::status::ok);
        response.set(http::field::content_type, "text/plain; charset=utf-8");
        response.body() = "lf-train agent: Prometheus metrics at /metrics\n";
      } else {
        response.result(get ? http::status::not_found : http::status::method_not_allowed);
        response.set(http::field::content_type, "text/plain; charset=utf-8");
        response.body() = get ? "not found: the metrics are at /metrics\n" : "only GET is served\n";
      }
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
        spdlog::debug("metrics endpoint: accept failed: {}", ec.message());
      }
      self->accept();
    });
  }

  asio::io_context& io;
  tcp::acceptor acceptor;
  Handler handler;
  std::list<std::weak_ptr<Session>> sessions;
  uint64_t scrapes = 0;
  bool closed = false;
};

MetricsServer::MetricsServer(asio::io_context& io, Handler handler)
    : impl_(std::make_shared<Impl>(io, std::move(handler))) {}

MetricsServer::~MetricsServer() { stop(); }

void MetricsServer::start(const std::string& host, uint16_t port) {
  beast::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  LF_CHECK(!ec, ConfigError, "LF_METRICS_ADDR '{}' is not an IP address (expected e.g. 0.0.0.0 or 127.0.0.1)", host);
  const tcp::endpoint ep(address, port);
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  LF_CHECK(!ec, NetworkError,
           "the metrics endpoint cannot listen on {}:{}: {}. {}", host, port, ec.message(),
           ec == asio::error::address_in_use ? "Another process uses that port: pick another --metrics-port "
                                               "(0 picks a free one)"
                                             : "Check LF_METRICS_ADDR");
  impl_->accept();
}

uint16_t MetricsServer::port() const {
  beast::error_code ec;
  const auto ep = impl_->acceptor.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

void MetricsServer::stop() {
  if (impl_->closed) return;
  impl_->closed = true;
  beast::error_code ignored;
  impl_->acceptor.close(ignored);
  for (auto& w : impl_->sessions)
    if (auto s = w.lock()) s->stream.close();
  impl_->sessions.clear();
}

uint64_t MetricsServer::scrapes() const { return impl_->scrapes; }

}  // namespace lf::metrics
