// GPU memory that keeps growing during training: a leak (tensors kept across steps) or
// batches that get longer, heading for an out-of-memory crash.
#include <fmt/format.h>

#include <deque>

#include "lf/metrics/health.h"

namespace lf::metrics {

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

class GpuMemoryGrowthRule final : public HealthRule {
 public:
  explicit GpuMemoryGrowthRule(const HealthThresholds& t) : t_(t) {}

  void check(const HealthInput& in, Alarm& alarm, std::vector<HealthEvent>& out) override {
    if (!in.gpus) return;
    for (const auto& g : *in.gpus) {
      if (!g.memory_used_bytes) continue;
      auto& h = history_[g.index];
      h.push_back({in.now, *g.memory_used_bytes});
      // Keep one sample at least a window old as the reference; drop what is older than it.
      const auto window = std::chrono::duration<double>(t_.gpu_mem_window_s);
      while (h.size() > 2 && in.now - h[1].first >= window) h.pop_front();
      if (in.now - h.front().first < window) continue;
      const double then = h.front().second, now = *g.memory_used_bytes;
      const std::string key = fmt::format("mem:{}", g.index);
      const bool growing = then >= t_.gpu_mem_min_bytes && now > then * (1 + t_.gpu_mem_growth);
      if (!growing) {
        if (alarm.clear(key))
          out.push_back({false, fmt::format("health: GPU {} ({}, {}) on {}: memory used steady again at {:.2f} GiB",
                                            g.index, g.uuid, in.ranks_on_gpu(g.index), in.node, now / kGiB), key});
        continue;
      }
      if (alarm.raise(key, in.now))
        out.push_back({true, fmt::format("health: GPU {} ({}, {}) on {}: memory used grew {:.0f}% in {:.0f} s ({:.2f} "
                                         "-> {:.2f} GiB; threshold {:.0f}%: LF_HEALTH_GPU_MEM_GROWTH / "
                                         "LF_HEALTH_GPU_MEM_WINDOW_S): a leak or ever longer batches, heading for "
                                         "out of memory",
                                         g.index, g.uuid, in.ranks_on_gpu(g.index), in.node, 100 * (now / then - 1),
                                         std::chrono::duration<double>(in.now - h.front().first).count(), then / kGiB,
                                         now / kGiB, 100 * t_.gpu_mem_growth), key});
    }
  }

 private:
  HealthThresholds t_;
  std::map<unsigned, std::deque<std::pair<HealthClock::time_point, double>>> history_;
};

}  // namespace

std::unique_ptr<HealthRule> make_gpu_memory_growth_rule(const HealthThresholds& t) {
  return std::make_unique<GpuMemoryGrowthRule>(t);
}

}  // namespace lf::metrics
