#pragma once
// The health rules (lf/metrics/health.h, the agents' own) over the whole job, as node 0 sees it
// from the nodes' statuses: the GPU rules (temperature, memory growth) per node, the rank rules
// (straggler, heartbeat gap) over every rank of the job at once, so a straggler is named against
// every other rank, not only its node's. What the page highlights: the conditions active now
// (from their warning to the event that clears them) and the last events. Private to src/ui.
// Threading: the page's thread.
#include <nlohmann/json.hpp>

#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "lf/metrics/health.h"
#include "lf/rendezvous/job_record.h"

namespace lf::ui {

class JobHealth {
 public:
  explicit JobHealth(metrics::HealthThresholds t);
  // Runs the rules on the record's latest statuses (rank heartbeat ages grown by each status' age).
  void check(const rdzv::JobRecord& record, metrics::HealthClock::time_point now, double wall_now);

  struct Active {
    std::string line;
    int64_t node = -1;  // -1: a rank rule (job-wide)
    double since = 0;   // wall time of the warning
  };
  // Active conditions by key ("straggler:5", "n1:temp:0", ...).
  const std::map<std::string, Active>& active() const { return active_; }
  // The global ranks an active condition names (straggler, heartbeat gap).
  std::set<int64_t> flagged_ranks() const;
  // GPUs ("node:index") an active condition names.
  std::set<std::string> flagged_gpus() const;
  nlohmann::json to_json() const;  // {"active": [...], "events": [...]}

 private:
  void take(const std::vector<metrics::HealthEvent>& events, int64_t node, double wall_now);

  metrics::HealthThresholds t_;
  std::map<int64_t, std::unique_ptr<metrics::HealthMonitor>> gpu_rules_;  // per node
  std::map<int64_t, metrics::RankSeries> node_ranks_;
  metrics::HealthMonitor rank_rules_;
  metrics::RankSeries all_ranks_;
  std::map<std::string, Active> active_;
  std::deque<nlohmann::json> events_;
};

}  // namespace lf::ui
