#include "lf/metrics/metrics_server.h"

#include "lf/metrics/http_server.h"

namespace lf::metrics {

namespace {

constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace

struct MetricsServer::Impl {
  Handler handler;
  uint64_t scrapes = 0;
  std::unique_ptr<HttpServer> http;
};

MetricsServer::MetricsServer(boost::asio::io_context& io, Handler handler) : impl_(std::make_shared<Impl>()) {
  impl_->handler = std::move(handler);
  Impl* im = impl_.get();
  impl_->http = std::make_unique<HttpServer>(
      io,
      [im](const HttpRequest& r) -> HttpReply {
        if (r.path == "/metrics") {
          ++im->scrapes;
          return {200, kContentType, r.head ? std::string() : im->handler(), {}};
        }
        if (r.target == "/") return {200, "text/plain; charset=utf-8", "lf-train agent: Prometheus metrics at /metrics\n", {}};
        return {404, "text/plain; charset=utf-8", "not found: the metrics are at /metrics\n", {}};
      },
      "the metrics endpoint", "pick another --metrics-port (0 picks a free one)", "LF_METRICS_ADDR");
}

MetricsServer::~MetricsServer() { stop(); }

void MetricsServer::start(const std::string& host, uint16_t port) { impl_->http->start(host, port); }

uint16_t MetricsServer::port() const { return impl_->http->port(); }

void MetricsServer::stop() { impl_->http->stop(); }

uint64_t MetricsServer::scrapes() const { return impl_->scrapes; }

}  // namespace lf::metrics
