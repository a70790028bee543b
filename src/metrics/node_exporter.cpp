#include "lf/metrics/node_exporter.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>

#include "lf/common/env.h"
#include "lf/common/env_knobs.h"
#include "lf/common/error.h"
#include "lf/common/wall_clock.h"
#include "lf/metrics/gpu_assignment.h"
#include "lf/metrics/gpu_series.h"

namespace lf::metrics {

namespace {

double positive_seconds(const char* name, std::optional<double> v, double fallback) {
  if (!v) return fallback;
  LF_CHECK(*v > 0, ConfigError, "{}={} must be a number of seconds > 0", name, *v);
  return *v;
}

}  // namespace

ExporterOptions ExporterOptions::from_env(uint16_t port) {
  ExporterOptions o;
  o.port = port;
  o.bind_host = knob_string("LF_METRICS_ADDR").value_or(o.bind_host);
  o.gpu_interval_s =
      positive_seconds("LF_METRICS_GPU_INTERVAL_S", knob_number("LF_METRICS_GPU_INTERVAL_S"), o.gpu_interval_s);
  o.nvml_library = knob_string("LF_NVML_LIBRARY").value_or(o.nvml_library);
  o.health = knob_bool("LF_HEALTH").value_or(true);
  o.thresholds = HealthThresholds::from_env();
  o.linger_s = knob_number("LF_METRICS_LINGER_S").value_or(o.linger_s);
  return o;
}

NodeExporter::NodeExporter(boost::asio::io_context& io, ExporterOptions options, RankSource ranks, FactsSource facts)
    : io_(io), opt_(std::move(options)), rank_source_(std::move(ranks)), facts_source_(std::move(facts)),
      server_(io, [this] { return render(); }), health_(opt_.thresholds), timer_(io) {}

NodeExporter::~NodeExporter() { stop(); }

void NodeExporter::start() {
  server_.start(opt_.bind_host, opt_.port);
  gpus_ = std::make_unique<GpuSampler>(opt_.gpu_interval_s, opt_.nvml_library);
  if (!gpus_->available())
    spdlog::info("metrics: no GPU series on this node: {}", gpus_->unavailable());
  interfaces_ = watched_interfaces(env_string("NCCL_SOCKET_IFNAME"), opt_.sys_root);
  // Printed as one line on its own, so a script (or a user with port 0) can find it.
  spdlog::info("metrics: serving Prometheus metrics on http://{}:{}/metrics", opt_.bind_host, server_.port());
  tick();
}

void NodeExporter::stop() {
  if (stopped_) return;
  stopped_ = true;
  timer_.cancel();
  server_.stop();
  gpus_.reset();
}

// Until the scraper's next visit has seen the final values (the last step, phase `done`), at
// most linger_s; not at all when nothing scraped during the job (nobody would come back).
bool NodeExporter::linger(std::function<void()> done) {
  if (stopped_ || opt_.linger_s <= 0 || server_.scrapes() == 0) return false;
  ranks_.update(rank_source_(), wall_now());
  spdlog::info("metrics: the job is over; serving its final values until the next scrape, at most {} s "
               "(LF_METRICS_LINGER_S)", opt_.linger_s);
  timer_.cancel();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(opt_.linger_s * 1000));
  linger_poll(server_.scrapes(), deadline, std::move(done));
  return true;
}

void NodeExporter::linger_poll(uint64_t scrapes_at_end, std::chrono::steady_clock::time_point deadline,
                               std::function<void()> done) {
  // A scrape is counted as its answer is queued: 200 ms more lets the answer leave.
  const bool seen = server_.scrapes() > scrapes_at_end;
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
  timer_.async_wait([this, scrapes_at_end, deadline, done = std::move(done)](boost::system::error_code ec) mutable {
    if (!ec) linger_poll(scrapes_at_end, deadline, std::move(done));
  });
}

void NodeExporter::tick() {
  if (stopped_) return;
  ranks_.update(rank_source_(), wall_now());
  net_ = read_interfaces(interfaces_, opt_.sys_root);
  ib_ = read_ib_ports(opt_.sys_root);
  const int per_second = std::max(1, static_cast<int>(1.0 / opt_.tick_s));
  if (opt_.health && ++ticks_ % per_second == 0) check_health(facts_source_());
  timer_.expires_after(std::chrono::milliseconds(static_cast<int64_t>(opt_.tick_s * 1000)));
  timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) tick();
  });
}

std::string NodeExporter::node_label(const AgentFacts& f) const {
  return f.node_rank >= 0 ? std::to_string(f.node_rank) : "unassigned";
}

void NodeExporter::check_health(const AgentFacts& facts) {
  const auto gpus = gpus_ ? gpus_->latest() : std::vector<GpuSample>{};
  HealthInput in;
  in.now = HealthClock::now();
  in.node = fmt::format("node {} ({})", node_label(facts), facts.hostname);
  in.gpus = &gpus;
  if (!gpus.empty()) {
    // CUDA_VISIBLE_DEVICES="" is set (no GPU), unlike env_string's reading of "".
    const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
    const auto visible = parse_cuda_visible_devices(cvd ? std::optional<std::string>(cvd) : std::nullopt,
                                                    static_cast<int>(gpus.size()), gpus);
    in.gpu_of_ordinal = resolve_visible(visible, gpus);
  }
  in.ranks = &ranks_.ranks();
  in.master_silence_s = facts.master_silence_s;
  for (const auto& e : health_.check(in)) {
    if (e.warning) spdlog::warn("{}", e.line);
    else spdlog::info("{}", e.line);
  }
}

std::string NodeExporter::render() {
  const AgentFacts f = facts_source_();
  ranks_.update(rank_source_(), wall_now());
  const std::string node = node_label(f);
  Exposition e;
  e.family("lf_agent_info", MetricType::kGauge, "1, with the agent's host, job id and lf-train version as labels");
  e.sample({{"node", node}, {"hostname", f.hostname}, {"rdzv_id", f.rdzv_id}, {"version", f.version}}, 1);
  e.family("lf_agent_generation", MetricType::kGauge, "The job's generation on this node (0, then +1 per restart)");
  e.sample({{"node", node}}, static_cast<double>(f.generation));
  e.family("lf_agent_restarts_total", MetricType::kCounter, "Restarts of the job this agent took part in");
  e.sample({{"node", node}}, static_cast<double>(f.restarts));
  if (f.master_silence_s) {
    e.family("lf_agent_master_heartbeat_age_seconds", MetricType::kGauge,
             "Seconds since the rendezvous server's last message (its heartbeat) reached this agent");
    e.sample({{"node", node}}, *f.master_silence_s);
  }
  if (!ranks_.ranks().empty()) {
    e.family("lf_agent_worker_up", MetricType::kGauge, "1 while the worker process of the rank runs");
    for (const auto& [rank, r] : ranks_.ranks())
      e.sample({{"node", node}, {"rank", std::to_string(rank)}, {"local_rank", std::to_string(r.report.local_rank)}},
               r.report.alive ? 1 : 0);
  }
  e.family("lf_agent_gpu_metrics_available", MetricType::kGauge, "1 when NVML loaded and lf_gpu_* series are served");
  e.sample({{"node", node}}, gpus_ && gpus_->available() ? 1 : 0);
  e.family("lf_agent_metrics_scrapes_total", MetricType::kCounter, "Scrapes of this endpoint answered");
  e.sample({{"node", node}}, static_cast<double>(server_.scrapes()));
  ranks_.write(e, node);
  if (gpus_) write_gpu_series(e, gpus_->latest(), node);
  write_net_series(e, net_, ib_, node);
  return e.take();
}

}  // namespace lf::metrics
