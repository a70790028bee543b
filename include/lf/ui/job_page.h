#pragma once
// The job's live page (issue 35): one HTML page with its script and style compiled into the
// binary (page_assets.h; no CDN: clusters are offline), served read-only by the metrics'
// HttpServer (GET/HEAD only), and three JSON answers the page polls:
//   /api/state            the job: nodes, ranks, GPUs, progress, curves, failures, warnings
//   /api/logs?rank=R      the last lines rank R wrote
//   /api/preview          the data preview (examples through the template, masked spans)
// from a PageSource: the running job on node 0 (live_source.h) or a finished run's output_dir
// (`lf-train ui OUTPUT_DIR`, offline_source.h).
// Binding: 127.0.0.1 unless asked (--ui-addr); bound wider, the job's data (/api/...) needs the
// page's token (`?token=` or `Authorization: Bearer`; LF_UI_TOKEN, else one made and printed in
// the URL; the page passes its own on). The page's files themselves hold nothing of the job.
// Threading: the io_context's thread (the source is read there).
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "lf/metrics/http_server.h"

namespace lf::ui {

class PageSource {
 public:
  virtual ~PageSource() = default;
  virtual std::string state_json() = 0;
  virtual std::string logs_json(int64_t rank) = 0;
  virtual std::string preview_json() = 0;
};

struct PageOptions {
  std::string bind_host = "127.0.0.1";  // --ui-addr / LF_UI_ADDR
  uint16_t port = 0;                    // --ui-port / LF_UI_PORT (0: a free one, printed)
  std::string token;                    // LF_UI_TOKEN; bound beyond loopback without one: made at start
  // LF_UI_LINGER_S: after the job, serve its final state until the open page's next poll (at
  // most this long; not at all when no page polled during the job).
  double linger_s = 60;
  // Options from LF_UI_ADDR / LF_UI_TOKEN / LF_UI_LINGER_S (ConfigError on bad values).
  static PageOptions from_env(uint16_t port);
};

class JobPage {
 public:
  JobPage(boost::asio::io_context& io, PageOptions options, std::unique_ptr<PageSource> source);
  ~JobPage();
  // Binds (NetworkError naming the port when in use) and logs the page's URL in one line:
  //   "ui: the job's live page is at http://127.0.0.1:PORT/" (+ "?token=..." when it needs one).
  void start(const std::string& what = "the job's live page");
  uint16_t port() const { return server_.port(); }
  const std::string& token() const { return opt_.token; }
  std::string url() const;
  void stop();
  // The job is over: keep serving until an open page polled its final state once more, at most
  // linger_s, then call `done`. False (and no call) when linger_s is 0 or no page polled.
  bool linger(std::function<void()> done);
  uint64_t state_requests() const { return state_requests_; }

  metrics::HttpReply answer(const metrics::HttpRequest& r);

 private:
  bool authorized(const metrics::HttpRequest& r) const;
  void linger_poll(uint64_t polls_at_end, std::chrono::steady_clock::time_point deadline, std::function<void()> done);

  boost::asio::io_context& io_;
  PageOptions opt_;
  std::unique_ptr<PageSource> source_;
  metrics::HttpServer server_;
  boost::asio::steady_timer timer_;
  uint64_t state_requests_ = 0;
  bool stopped_ = false;
};

}  // namespace lf::ui
