#include "lf/ui/job_page.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <charconv>

#include "lf/common/env_knobs.h"
#include "lf/common/error.h"
#include "lf/common/job_token.h"
#include "lf/ui/page_assets.h"

namespace lf::ui {

namespace {

constexpr const char* kJson = "application/json; charset=utf-8";

// The page is read-only and self-contained: no script or style from anywhere else, nothing cached
// (it changes every second), never framed.
metrics::HttpReply with_headers(metrics::HttpReply r) {
  r.headers.emplace_back("Cache-Control", "no-store");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Content-Security-Policy",
                         "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' "
                         "data:; frame-ancestors 'none'");
  return r;
}

// Compares without an early exit, so timing reveals nothing about the token.
bool same_token(const std::string& a, const std::string& b) {
  unsigned diff = a.size() != b.size();
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i)
    diff |= static_cast<unsigned char>(i < a.size() ? a[i] : 0) ^ static_cast<unsigned char>(i < b.size() ? b[i] : 0);
  return diff == 0;
}

}  // namespace

PageOptions PageOptions::from_env(uint16_t port) {
  PageOptions o;
  o.port = port;
  o.bind_host = knob_string("LF_UI_ADDR").value_or(o.bind_host);
  o.token = knob_string("LF_UI_TOKEN").value_or("");
  o.linger_s = knob_number("LF_UI_LINGER_S").value_or(o.linger_s);
  LF_CHECK(o.linger_s >= 0, ConfigError, "LF_UI_LINGER_S={} must be a number of seconds >= 0 (0: no linger)",
           o.linger_s);
  return o;
}

JobPage::JobPage(boost::asio::io_context& io, PageOptions options, std::unique_ptr<PageSource> source)
    : io_(io), opt_(std::move(options)), source_(std::move(source)),
      server_(io, [this](const metrics::HttpRequest& r) { return answer(r); }, "the live page",
              "pick another --ui-port (0 picks a free one)", "LF_UI_ADDR / --ui-addr"),
      timer_(io) {}

JobPage::~JobPage() { stop(); }

void JobPage::start(const std::string& what) {
  // Beyond this host the page shows the job to whoever reaches the port: only with its token.
  if (!metrics::is_loopback_address(opt_.bind_host) && opt_.token.empty()) opt_.token = make_job_token();
  server_.start(opt_.bind_host, opt_.port);
  // One line of its own, so a script (or a user with port 0) finds it.
  spdlog::info("ui: {} is at {}{}", what, url(),
               opt_.token.empty() ? " (this host only; --ui-addr to serve it beyond, with a token)"
                                  : " (bound beyond this host: only with its token)");
}

std::string JobPage::url() const {
  const std::string host = opt_.bind_host.find(':') != std::string::npos ? "[" + opt_.bind_host + "]" : opt_.bind_host;
  return fmt::format("http://{}:{}/{}", host, server_.port(), opt_.token.empty() ? "" : "?token=" + opt_.token);
}

void JobPage::stop() {
  if (stopped_) return;
  stopped_ = true;
  timer_.cancel();
  server_.stop();
}

bool JobPage::authorized(const metrics::HttpRequest& r) const {
  if (opt_.token.empty()) return true;
  if (same_token(r.query_value("token"), opt_.token)) return true;
  const std::string bearer = "Bearer ";
  return r.authorization.rfind(bearer, 0) == 0 && same_token(r.authorization.substr(bearer.size()), opt_.token);
}

metrics::HttpReply JobPage::answer(const metrics::HttpRequest& r) {
  // The page's own files hold nothing of the job (the same bytes in every lf-train): served to
  // anyone; the job's data (/api/...) only with the token.
  if (const PageAsset* a = find_page_asset(r.path))
    return with_headers({200, std::string(a->content_type), std::string(a->body), {}});
  if (!authorized(r))
    return with_headers({401, "text/plain; charset=utf-8",
                         "this page needs its token: open the URL lf-train printed (\"ui: ... is at "
                         "http://HOST:PORT/?token=...\"), or set LF_UI_TOKEN on node 0 and pass ?token=\n",
                         {}});
  if (r.path == "/api/state") {
    ++state_requests_;
    return with_headers({200, kJson, r.head ? std::string() : source_->state_json(), {}});
  }
  if (r.path == "/api/logs") {
    const std::string v = r.query_value("rank");
    int64_t rank = -1;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), rank);
    if (v.empty() || ec != std::errc() || end != v.data() + v.size() || rank < 0)
      return with_headers({400, "text/plain; charset=utf-8", "expected /api/logs?rank=N (a global rank >= 0)\n", {}});
    return with_headers({200, kJson, source_->logs_json(rank), {}});
  }
  if (r.path == "/api/preview") return with_headers({200, kJson, source_->preview_json(), {}});
  return with_headers({404, "text/plain; charset=utf-8",
                       "not found: the page is at /, its data at /api/state, /api/logs?rank=N, /api/preview\n", {}});
}

// Until the open page polled the final state once more, at most linger_s; not at all when no
// page polled during the job (nobody would come back).
bool JobPage::linger(std::function<void()> done) {
  if (stopped_ || opt_.linger_s <= 0 || state_requests_ == 0) return false;
  spdlog::info("ui: the job is over; the live page shows its end until its next refresh, at most {} s "
               "(LF_UI_LINGER_S)", opt_.linger_s);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(opt_.linger_s * 1000));
  linger_poll(state_requests_, deadline, std::move(done));
  return true;
}

void JobPage::linger_poll(uint64_t polls_at_end, std::chrono::steady_clock::time_point deadline,
                          std::function<void()> done) {
  // A poll is counted as its answer is built: 200 ms more lets the answer leave.
  const bool seen = state_requests_ > polls_at_end;
  if (seen || std::chrono::steady_clock::now() >= deadline) {
    timer_.expires_after(std::chrono::milliseconds(seen ? 200 : 0));
    timer_.async_wait([this, done = std::move(done)](boost::system::error_code ec) {
      if (ec) return;
      stop();
      done();
    });
    return;
  }
  timer_.expires_after(std::chrono::milliseconds(50));
  timer_.async_wait([this, polls_at_end, deadline, done = std::move(done)](boost::system::error_code ec) mutable {
    if (!ec) linger_poll(polls_at_end, deadline, std::move(done));
  });
}

}  // namespace lf::ui
