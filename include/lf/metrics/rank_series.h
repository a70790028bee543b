#pragma once
// The lf_train_* series, from the workers' heartbeat payloads (rank_report.h). What differs
// per rank (step, phase, tokens per second, MFU, step times, heartbeats) is one series per
// rank; what every rank shares (loss, learning rate, grad norm, epoch, eval loss, the job's
// total steps and tokens) is the job's, one series from global rank 0 (on node 0's endpoint).
// Most are the last value a rank reported (gauges); lf_train_step_seconds is a histogram,
// so it keeps state: update() is called often (the exporter's 250 ms tick and every
// scrape) and observes each newly finished step once. Steps finished between two updates
// (faster than 4 per second) are counted with the latest step time seen: a payload
// carries only the last step's. A new generation (restart) keeps the histograms: they
// are the job's. Threading: the agent's io thread.
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lf/common/progress_metrics.h"
#include "lf/metrics/exposition.h"
#include "lf/metrics/rank_report.h"

namespace lf::metrics {

class RankSeries {
 public:
  // wall_now: seconds since the epoch (lf_train_last_step_timestamp_seconds is wall time).
  void update(const std::vector<RankReport>& reports, double wall_now);
  // Writes every lf_train_* and lf_worker_* family; `node` labels each series.
  void write(Exposition& e, const std::string& node) const;

  // The last parsed report of each rank (health rules read step times from it).
  struct Rank {
    RankReport report;
    ProgressMetrics values;  // its last beat's metrics
    Histogram step_seconds{kStepBuckets};
    std::optional<int64_t> last_step;  // the step last observed in the histogram
    double last_step_wall = 0;         // wall time of the beat that finished last_step
  };
  const std::map<int, Rank>& ranks() const { return ranks_; }

  static inline const std::vector<double> kStepBuckets = {0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128, 300};

 private:
  std::map<int, Rank> ranks_;
};

}  // namespace lf::metrics
