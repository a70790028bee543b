// GPU temperature above the threshold for a while (a failing fan or airflow: the GPU is
// about to throttle and slow the whole job).
#include <fmt/format.h>

#include "lf/metrics/health.h"

namespace lf::metrics {

namespace {

class GpuTemperatureRule final : public HealthRule {
 public:
  explicit GpuTemperatureRule(const HealthThresholds& t) : t_(t) {}

  void check(const HealthInput& in, Alarm& alarm, std::vector<HealthEvent>& out) override {
    if (!in.gpus) return;
    for (const auto& g : *in.gpus) {
      if (!g.temperature_celsius) continue;
      const std::string key = fmt::format("temp:{}", g.index);
      if (*g.temperature_celsius <= t_.gpu_temp_c) {
        hot_since_.erase(g.index);
        if (alarm.clear(key))
          out.push_back({false, fmt::format("health: GPU {} ({}, {}) on {}: temperature back to {:.0f} °C", g.index,
                                            g.uuid, in.ranks_on_gpu(g.index), in.node, *g.temperature_celsius), key});
        continue;
      }
      const auto since = hot_since_.emplace(g.index, in.now).first->second;
      const double hot_s = std::chrono::duration<double>(in.now - since).count();
      if (hot_s >= t_.gpu_temp_for_s && alarm.raise(key, in.now))
        out.push_back({true, fmt::format("health: GPU {} ({}, {}) on {}: temperature {:.0f} °C, above {:.0f} °C for "
                                         "{:.0f} s (LF_HEALTH_GPU_TEMP_C / LF_HEALTH_GPU_TEMP_FOR_S): check cooling; "
                                         "it will throttle and slow every rank",
                                         g.index, g.uuid, in.ranks_on_gpu(g.index), in.node, *g.temperature_celsius,
                                         t_.gpu_temp_c, hot_s), key});
    }
  }

 private:
  HealthThresholds t_;
  std::map<unsigned, HealthClock::time_point> hot_since_;
};

}  // namespace

std::unique_ptr<HealthRule> make_gpu_temperature_rule(const HealthThresholds& t) {
  return std::make_unique<GpuTemperatureRule>(t);
}

}  // namespace lf::metrics
