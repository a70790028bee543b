#pragma once
// One node's metrics: the agent creates it when --metrics-port / LF_METRICS_PORT is set.
// It serves the exposition (metrics_server.h) built from
//   - the agent's own facts (generation, restarts, workers up, server heartbeat age),
//   - every local rank's last heartbeat payload (rank_series.h),
//   - every GPU through NVML (gpu_sampler.h; none without the driver: one info line),
//   - network and InfiniBand counters (net_counters.h),
// and runs the health rules (health.h) every second, logging their lines.
// The sources are pulled on the io thread, where the agent owns them; only NVML sampling
// runs on a thread of its own. Threading: the agent's io thread.
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lf/metrics/gpu_sampler.h"
#include "lf/metrics/health.h"
#include "lf/metrics/metrics_server.h"
#include "lf/metrics/net_counters.h"
#include "lf/metrics/rank_report.h"
#include "lf/metrics/rank_series.h"

namespace lf::metrics {

struct AgentFacts {
  int64_t node_rank = -1;  // -1 before the rendezvous assigned one
  int64_t generation = 0;
  int64_t restarts = 0;
  std::string hostname, rdzv_id, version;
  std::optional<double> master_silence_s;  // seconds since the server's last message; none before joining
};

struct ExporterOptions {
  std::string bind_host = "127.0.0.1";  // LF_METRICS_ADDR (--metrics-addr): this host only unless asked
  uint16_t port = 0;
  double tick_s = 0.25;          // rank payloads and network counters refresh
  double gpu_interval_s = 1;     // LF_METRICS_GPU_INTERVAL_S
  std::string nvml_library = "libnvidia-ml.so.1";  // LF_NVML_LIBRARY
  std::string sys_root = "/sys";
  bool health = true;            // LF_HEALTH=0: no health lines
  // LF_METRICS_LINGER_S: after the job, serve its final values until the next scrape (at most
  // this long; not at all when nothing scraped during the job).
  double linger_s = 60;
  HealthThresholds thresholds;
  // The LF_METRICS_* / LF_NVML_LIBRARY / LF_HEALTH* variables (ConfigError on bad values).
  static ExporterOptions from_env(uint16_t port);
};

class NodeExporter {
 public:
  using RankSource = std::function<std::vector<RankReport>()>;
  using FactsSource = std::function<AgentFacts()>;

  NodeExporter(boost::asio::io_context& io, ExporterOptions options, RankSource ranks, FactsSource facts);
  ~NodeExporter();
  // Binds (NetworkError naming the port when in use), starts the ticks, logs the URL.
  void start();
  uint16_t port() const { return server_.port(); }
  // The GPU sampler (null before start()): the node status for the live page shares it.
  const GpuSampler* gpu_sampler() const { return gpus_.get(); }
  void stop();
  // The job is over: keep serving its final values until a scraper's next visit saw them (the
  // last step, phase done), at most linger_s, then call `done`. False (and no call) when
  // linger_s is 0 or nothing scraped during the job.
  bool linger(std::function<void()> done);
  // The exposition as a scrape would get it now.
  std::string render();

 private:
  void linger_poll(uint64_t scrapes_at_end, std::chrono::steady_clock::time_point deadline, std::function<void()> done);
  void tick();
  void check_health(const AgentFacts& facts);
  std::string node_label(const AgentFacts& f) const;

  boost::asio::io_context& io_;
  ExporterOptions opt_;
  RankSource rank_source_;
  FactsSource facts_source_;
  MetricsServer server_;
  std::unique_ptr<GpuSampler> gpus_;
  RankSeries ranks_;
  HealthMonitor health_;
  std::vector<InterfaceCounters> net_;
  std::vector<IbPortCounters> ib_;
  std::vector<std::string> interfaces_;
  boost::asio::steady_timer timer_;
  int ticks_ = 0;
  bool stopped_ = false;
};

}  // namespace lf::metrics
