#pragma once
// The HTTP side of the metrics endpoint (Boost.Beast): GET /metrics answers the body the
// handler builds, in Prometheus' text format; GET / a pointer to it; anything else 404.
// Keep-alive connections, a deadline on every read and write (a slow or silent client is
// dropped), at most kMaxConnections at once (more are closed at accept), so a scraper
// storm costs the io thread short handler calls and never blocks it.
// Threading: everything on the given io_context's thread; the handler runs there too.
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace lf::metrics {

class MetricsServer {
 public:
  using Handler = std::function<std::string()>;
  static constexpr int kMaxConnections = 512;

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
