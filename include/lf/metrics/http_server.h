#pragma once
// A small read-only HTTP/1.1 server (Boost.Beast) for lf-train's pages: the metrics endpoint
// (metrics_server.h) and node 0's live page (lf/ui/job_page.h). GET and HEAD only (anything else
// is answered 405 without calling the handler); keep-alive connections; a deadline on every
// read and write (a slow or silent client is dropped); at most kMaxConnections at once (more
// are closed at accept), so a storm of clients costs the io thread short handler calls and
// never blocks it. Threading: everything on the given io_context's thread; the handler too.
#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace lf::metrics {

struct HttpRequest {
  std::string target;  // as sent: "/api/state?token=..."
  std::string path;    // before '?'
  std::string query;   // after '?' ("" when none)
  std::string authorization;  // the Authorization header ("" when none)
  bool head = false;
  // The value of `name` in the query (percent-decoding not needed for lf-train's own names and
  // hex tokens); "" when absent.
  std::string query_value(const std::string& name) const;
};

struct HttpReply {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

class HttpServer {
 public:
  using Handler = std::function<HttpReply(const HttpRequest&)>;
  static constexpr int kMaxConnections = 512;

  // what: the server's name in errors ("the metrics endpoint"); port_hint: what to change when
  // the port is taken ("pick another --metrics-port (0 picks a free one)"); addr_hint: where
  // the address came from ("LF_METRICS_ADDR").
  HttpServer(boost::asio::io_context& io, Handler handler, std::string what, std::string port_hint,
             std::string addr_hint);
  ~HttpServer();
  // Binds host:port (port 0: a free one) and starts accepting. ConfigError when host is not an
  // IP address; NetworkError naming the port when it is in use or the address not this host's.
  void start(const std::string& host, uint16_t port);
  uint16_t port() const;
  // Closes the listener and every connection.
  void stop();
  uint64_t requests() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// True for 127.0.0.0/8 and ::1 (a page there needs no token: only this host reaches it).
bool is_loopback_address(const std::string& host);

}  // namespace lf::metrics
