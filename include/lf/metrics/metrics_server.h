#pragma once
// The HTTP side of the metrics endpoint (http_server.h, Boost.Beast): GET /metrics answers the
// body the handler builds, in Prometheus' text format; GET / a pointer to it; anything else 404
// (405 for methods other than GET and HEAD). Keep-alive connections, deadlines and the
// connection limit are the HttpServer's.
// Threading: everything on the given io_context's thread; the handler runs there too.
#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace lf::metrics {

class MetricsServer {
 public:
  using Handler = std::function<std::string()>;
  static constexpr int kMaxConnections = 512;  // HttpServer::kMaxConnections

  MetricsServer(boost::asio::io_context& io, Handler handler);
  ~MetricsServer();
  // Binds host:port (port 0: a free one) and starts accepting. NetworkError naming the
  // port when it is in use or the address is not this host's.
  void start(const std::string& host, uint16_t port);
  uint16_t port() const;
  // Closes the listener and every connection.
  void stop();
  uint64_t scrapes() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace lf::metrics
