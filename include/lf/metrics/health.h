#pragma once
// Health warnings in the agent's log, the thresholds the multi-node guides use, each one
// line naming node, rank, GPU and value ("health: ..."). Rules (one file each):
//   GPU temperature above LF_HEALTH_GPU_TEMP_C (85) for LF_HEALTH_GPU_TEMP_FOR_S (60 s)
//   GPU memory used growing more than LF_HEALTH_GPU_MEM_GROWTH (0.30) within
//     LF_HEALTH_GPU_MEM_WINDOW_S (300 s), from at least LF_HEALTH_GPU_MEM_MIN_BYTES (1 GiB)
//   a straggler: a rank whose median busy time per step (step time minus the exposed
//     communication wait) over its last 20 steps is LF_HEALTH_STRAGGLER_FACTOR (2) times
//     the median of the other ranks this agent sees (its node's; across nodes use the
//     Prometheus rule in docs/prometheus/lf-train-alerts.yml)
//   a worker heartbeat gap above LF_HEALTH_HEARTBEAT_GAP_S (10 s), and the rendezvous
//     server silent above LF_HEALTH_MASTER_GAP_S (2 s)
// A condition is logged when it starts, again every LF_HEALTH_REPEAT_S (300 s) while it
// lasts, and once (info) when it clears. Time is passed in: tests drive it without
// sleeping. Threading: the agent's io thread.
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lf/metrics/nvml.h"
#include "lf/metrics/rank_series.h"

namespace lf::metrics {

using HealthClock = std::chrono::steady_clock;

struct HealthThresholds {
  double gpu_temp_c = 85, gpu_temp_for_s = 60;
  double gpu_mem_growth = 0.30, gpu_mem_window_s = 300, gpu_mem_min_bytes = 1024.0 * 1024 * 1024;
  double straggler_factor = 2;
  double heartbeat_gap_s = 10, master_gap_s = 2;
  double repeat_s = 300;
  // The LF_HEALTH_* variables above; ConfigError naming one that is not a number >= 0.
  static HealthThresholds from_env();
};

struct HealthInput {
  HealthClock::time_point now;
  std::string node;  // "node 1 (host-b)"
  const std::vector<GpuSample>* gpus = nullptr;
  // CUDA ordinal -> NVML index (gpu_assignment.h); a local rank r uses ordinal r mod size.
  std::vector<std::optional<unsigned>> gpu_of_ordinal;
  const std::map<int, RankSeries::Rank>* ranks = nullptr;
  std::optional<double> master_silence_s;  // seconds since the rendezvous server's last message

  // "GPU 3 (GPU-8f2e...)" for the rank's GPU, or "no GPU" on a CPU run.
  std::string gpu_of_rank(const RankSeries::Rank& r) const;
  // "rank 3" / "ranks 3, 7" / "no rank of this job" for an NVML GPU.
  std::string ranks_on_gpu(unsigned nvml_index) const;

  // Job-wide checks (node 0's live page looks at every node's ranks at once): where each global
  // rank runs ("node 1 (host-b), GPU 3 (GPU-...)"); null: on `node`, its GPU per gpu_of_rank.
  const std::map<int, std::string>* places = nullptr;
  // "node 1 (host-b), GPU 3 (GPU-8f2e...)": the rank's node and GPU, for the rules' lines.
  std::string where(const RankSeries::Rank& r) const;
};

struct HealthEvent {
  bool warning = true;  // false: a condition cleared (info)
  std::string line;
  // The condition ("straggler:5", "beat:3", "temp:0", "mem:0", "beat:master"): a page holds it
  // active from its warning until the event that clears it.
  std::string key;
};

// Onset / reminder / clear bookkeeping for keyed conditions.
class Alarm {
 public:
  explicit Alarm(double repeat_s) : repeat_s_(repeat_s) {}
  // The condition `key` holds at `now`: true when it should be logged (onset or reminder).
  bool raise(const std::string& key, HealthClock::time_point now);
  // It does not hold: true when it did (log that it cleared).
  bool clear(const std::string& key);

 private:
  double repeat_s_;
  std::map<std::string, HealthClock::time_point> last_logged_;
};

class HealthRule {
 public:
  virtual ~HealthRule() = default;
  virtual void check(const HealthInput& in, Alarm& alarm, std::vector<HealthEvent>& out) = 0;
};

std::unique_ptr<HealthRule> make_gpu_temperature_rule(const HealthThresholds& t);
std::unique_ptr<HealthRule> make_gpu_memory_growth_rule(const HealthThresholds& t);
std::unique_ptr<HealthRule> make_straggler_rule(const HealthThresholds& t);
std::unique_ptr<HealthRule> make_heartbeat_gap_rule(const HealthThresholds& t);

class HealthMonitor {
 public:
  // Every rule above.
  explicit HealthMonitor(HealthThresholds t);
  // These rules only (node 0's page runs the GPU rules per node and the rank rules job-wide).
  HealthMonitor(HealthThresholds t, std::vector<std::unique_ptr<HealthRule>> rules);
  std::vector<HealthEvent> check(const HealthInput& in);
  const HealthThresholds& thresholds() const { return t_; }

 private:
  HealthThresholds t_;
  Alarm alarm_;
  std::vector<std::unique_ptr<HealthRule>> rules_;
};

}  // namespace lf::metrics
