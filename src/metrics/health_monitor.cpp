#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdlib>

#include "lf/common/env.h"
#include "lf/common/error.h"
#include "lf/metrics/health.h"

namespace lf::metrics {

namespace {

void read_threshold(const char* name, double& out) {
  const auto v = env_string(name);
  if (!v) return;
  char* end = nullptr;
  const double d = std::strtod(v->c_str(), &end);
  LF_CHECK(end && *end == '\0' && !v->empty() && std::isfinite(d) && d >= 0, ConfigError,
           "{}='{}' is not a number >= 0 (a health threshold: README \"Metrics\")", name, *v);
  out = d;
}

}  // namespace

HealthThresholds HealthThresholds::from_env() {
  HealthThresholds t;
  read_threshold("LF_HEALTH_GPU_TEMP_C", t.gpu_temp_c);
  read_threshold("LF_HEALTH_GPU_TEMP_FOR_S", t.gpu_temp_for_s);
  read_threshold("LF_HEALTH_GPU_MEM_GROWTH", t.gpu_mem_growth);
  read_threshold("LF_HEALTH_GPU_MEM_WINDOW_S", t.gpu_mem_window_s);
  read_threshold("LF_HEALTH_GPU_MEM_MIN_BYTES", t.gpu_mem_min_bytes);
  read_threshold("LF_HEALTH_STRAGGLER_FACTOR", t.straggler_factor);
  read_threshold("LF_HEALTH_HEARTBEAT_GAP_S", t.heartbeat_gap_s);
  read_threshold("LF_HEALTH_MASTER_GAP_S", t.master_gap_s);
  read_threshold("LF_HEALTH_REPEAT_S", t.repeat_s);
  return t;
}

std::string HealthInput::gpu_of_rank(const RankSeries::Rank& r) const {
  if (gpu_of_ordinal.empty() || !gpus || gpus->empty()) return "no GPU";
  const auto idx = gpu_of_ordinal[static_cast<size_t>(r.report.local_rank) % gpu_of_ordinal.size()];
  if (!idx) return "GPU ?";
  for (const auto& g : *gpus)
    if (g.index == *idx) return fmt::format("GPU {} ({})", g.index, g.uuid);
  return fmt::format("GPU {}", *idx);
}

std::string HealthInput::ranks_on_gpu(unsigned nvml_index) const {
  std::vector<int> found;
  if (ranks && !gpu_of_ordinal.empty())
    for (const auto& [rank, r] : *ranks) {
      const auto idx = gpu_of_ordinal[static_cast<size_t>(r.report.local_rank) % gpu_of_ordinal.size()];
      if (idx && *idx == nvml_index) found.push_back(rank);
    }
  if (found.empty()) return "no rank of this job";
  return fmt::format("{} {}", found.size() == 1 ? "rank" : "ranks", fmt::join(found, ", "));
}

bool Alarm::raise(const std::string& key, HealthClock::time_point now) {
  auto it = last_logged_.find(key);
  if (it != last_logged_.end() && std::chrono::duration<double>(now - it->second).count() < repeat_s_) return false;
  last_logged_[key] = now;
  return true;
}

bool Alarm::clear(const std::string& key) { return last_logged_.erase(key) > 0; }

HealthMonitor::HealthMonitor(HealthThresholds t) : t_(t), alarm_(t.repeat_s) {
  rules_.push_back(make_gpu_temperature_rule(t_));
  rules_.push_back(make_gpu_memory_growth_rule(t_));
  rules_.push_back(make_straggler_rule(t_));
  rules_.push_back(make_heartbeat_gap_rule(t_));
}

std::vector<HealthEvent> HealthMonitor::check(const HealthInput& in) {
  std::vector<HealthEvent> out;
  for (auto& r : rules_) r->check(in, alarm_, out);
  return out;
}

}  // namespace lf::metrics
