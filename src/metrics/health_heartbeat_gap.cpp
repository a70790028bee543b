// Heartbeat gaps below the hang timeouts: a worker that goes quiet for seconds (swapping,
// a stalled filesystem, a stop-the-world pause) or a flaky link to the rendezvous server.
// Long before the agent declares a hang (worker) or a lost node (server), the log says so.
#include <fmt/format.h>

#include "lf/metrics/health.h"

namespace lf::metrics {

namespace {

class HeartbeatGapRule final : public HealthRule {
 public:
  explicit HeartbeatGapRule(const HealthThresholds& t) : t_(t) {}

  void check(const HealthInput& in, Alarm& alarm, std::vector<HealthEvent>& out) override {
    if (in.ranks)
      for (const auto& [rank, r] : *in.ranks) {
        const std::string key = fmt::format("beat:{}", rank);
        const bool gap = r.report.alive && r.report.heard && r.report.since_beat_s > t_.heartbeat_gap_s;
        if (!gap) {
          if (alarm.clear(key) && r.report.alive)
            out.push_back({false, fmt::format("health: rank {} on {}: heartbeats again", rank,
                                              in.where(r)), key});
          continue;
        }
        if (alarm.raise(key, in.now))
          out.push_back({true, fmt::format("health: rank {} on {} (pid {}): no heartbeat for {:.1f} s (threshold "
                                           "{:.0f} s: LF_HEALTH_HEARTBEAT_GAP_S); last phase {}, step {}",
                                           rank, in.where(r), r.report.pid, r.report.since_beat_s,
                                           t_.heartbeat_gap_s, r.report.phase.empty() ? "none" : r.report.phase,
                                           r.report.step), key});
      }
    if (!in.master_silence_s) return;
    const bool gap = *in.master_silence_s > t_.master_gap_s;
    if (!gap) {
      if (alarm.clear("beat:master"))
        out.push_back({false, fmt::format("health: {}: the rendezvous server answers again", in.node), "beat:master"});
      return;
    }
    if (alarm.raise("beat:master", in.now))
      out.push_back({true, fmt::format("health: {} (all its ranks and GPUs): no message from the "
                                       "rendezvous server for {:.1f} s (threshold {:.1f} s: LF_HEALTH_MASTER_GAP_S): "
                                       "a congested or flaky link to node 0",
                                       in.node, *in.master_silence_s, t_.master_gap_s), "beat:master"});
  }

 private:
  HealthThresholds t_;
};

}  // namespace

std::unique_ptr<HealthRule> make_heartbeat_gap_rule(const HealthThresholds& t) {
  return std::make_unique<HeartbeatGapRule>(t);
}

}  // namespace lf::metrics
