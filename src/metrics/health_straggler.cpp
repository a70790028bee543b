// A straggler: in synchronous data parallel every rank's step takes as long as the slowest
// one's (the others wait in the all-reduce), so step time alone names nobody. The busy time
// does: step time minus the communication wait backward did not hide (comm_exposed_s, sent
// under LF_PROFILE_PHASES=1; without it, step time, which still names a rank that is slow
// between collectives, e.g. its data loading). Medians over each rank's last steps, so one
// slow step (a checkpoint, an eval) names no one.
#include <fmt/format.h>

#include <algorithm>
#include <deque>

#include "lf/metrics/health.h"

namespace lf::metrics {

namespace {

constexpr size_t kWindow = 20;
constexpr size_t kMinSteps = 5;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

class StragglerRule final : public HealthRule {
 public:
  explicit StragglerRule(const HealthThresholds& t) : t_(t) {}

  void check(const HealthInput& in, Alarm& alarm, std::vector<HealthEvent>& out) override {
    if (!in.ranks) return;
    for (const auto& [rank, r] : *in.ranks) record(rank, r);
    std::map<int, double> medians;
    for (const auto& [rank, w] : busy_)
      if (w.times.size() >= kMinSteps && in.ranks->count(rank) && in.ranks->at(rank).report.alive)
        medians[rank] = median({w.times.begin(), w.times.end()});
    if (medians.size() < 2) return;
    for (const auto& [rank, mine] : medians) {
      std::vector<double> others;
      for (const auto& [o, m] : medians)
        if (o != rank) others.push_back(m);
      const double typical = median(others);
      const std::string key = fmt::format("straggler:{}", rank);
      const auto& r = in.ranks->at(rank);
      if (typical <= 0 || mine < t_.straggler_factor * typical) {
        if (alarm.clear(key))
          out.push_back({false, fmt::format("health: rank {} on {}: no longer a straggler ({:.3f} s per step, "
                                            "others {:.3f} s)", rank, in.where(r), mine, typical), key});
        continue;
      }
      if (alarm.raise(key, in.now))
        out.push_back({true, fmt::format("health: straggler: rank {} on {}: {:.3f} s busy per step, {:.1f}x the "
                                         "median of the other ranks ({:.3f} s; medians of the last {} steps; "
                                         "threshold {:.1f}x: LF_HEALTH_STRAGGLER_FACTOR): every rank waits for it; "
                                         "check its GPU clocks and temperature, and what else runs there",
                                         rank, in.where(r), mine, mine / typical, typical, kWindow,
                                         t_.straggler_factor), key});
    }
  }

 private:
  struct Window {
    int64_t step = -1;
    std::deque<double> times;
  };

  void record(int rank, const RankSeries::Rank& r) {
    if (!r.values.step_s || r.report.phase != "training") return;
    auto& w = busy_[rank];
    if (r.report.step == w.step) return;
    w.step = r.report.step;
    w.times.push_back(std::max(0.0, *r.values.step_s - r.values.comm_exposed_s.value_or(0)));
    if (w.times.size() > kWindow) w.times.pop_front();
  }

  HealthThresholds t_;
  std::map<int, Window> busy_;
};

}  // namespace

std::unique_ptr<HealthRule> make_straggler_rule(const HealthThresholds& t) { return std::make_unique<StragglerRule>(t); }

}  // namespace lf::metrics
