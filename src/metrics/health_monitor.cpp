#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdlib>

#include "lf/common/env_knobs.h"
#include "lf/common/error.h"
#include "lf/metrics/health.h"

namespace lf::metrics {

namespace {

// A threshold knob; its registered default equals the field's initial value (health.h).
void check_threshold(const char* name, std::optional<double> v, double& out) {
  if (!v) return;
  LF_CHECK(*v >= 0, ConfigError, "{}={} is not a number >= 0 (a health threshold: README \"Watching a running job\")",
           name, *v);
  out = *v;
}

}  // namespace

HealthThresholds HealthThresholds::from_env() {
  HealthThresholds t;
  check_threshold("LF_HEALTH_GPU_TEMP_C", knob_number("LF_HEALTH_GPU_TEMP_C"), t.gpu_temp_c);
  check_threshold("LF_HEALTH_GPU_TEMP_FOR_S", knob_number("LF_HEALTH_GPU_TEMP_FOR_S"), t.gpu_temp_for_s);
  check_threshold("LF_HEALTH_GPU_MEM_GROWTH", knob_number("LF_HEALTH_GPU_MEM_GROWTH"), t.gpu_mem_growth);
  check_threshold("LF_HEALTH_GPU_MEM_WINDOW_S", knob_number("LF_HEALTH_GPU_MEM_WINDOW_S"), t.gpu_mem_window_s);
  check_threshold("LF_HEALTH_GPU_MEM_MIN_BYTES", knob_number("LF_HEALTH_GPU_MEM_MIN_BYTES"), t.gpu_mem_min_bytes);
  check_threshold("LF_HEALTH_STRAGGLER_FACTOR", knob_number("LF_HEALTH_STRAGGLER_FACTOR"), t.straggler_factor);
  check_threshold("LF_HEALTH_HEARTBEAT_GAP_S", knob_number("LF_HEALTH_HEARTBEAT_GAP_S"), t.heartbeat_gap_s);
  check_threshold("LF_HEALTH_MASTER_GAP_S", knob_number("LF_HEALTH_MASTER_GAP_S"), t.master_gap_s);
  check_threshold("LF_HEALTH_REPEAT_S", knob_number("LF_HEALTH_REPEAT_S"), t.repeat_s);
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

std::string HealthInput::where(const RankSeries::Rank& r) const {
  if (places) {
    const auto it = places->find(r.report.rank);
    if (it != places->end()) return it->second;
  }
  return fmt::format("{}, {}", node, gpu_of_rank(r));
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

HealthMonitor::HealthMonitor(HealthThresholds t, std::vector<std::unique_ptr<HealthRule>> rules)
    : t_(t), alarm_(t.repeat_s), rules_(std::move(rules)) {}

std::vector<HealthEvent> HealthMonitor::check(const HealthInput& in) {
  std::vector<HealthEvent> out;
  for (auto& r : rules_) r->check(in, alarm_, out);
  return out;
}

}  // namespace lf::metrics
