#include "lf/agent/rank_reports.h"

#include <signal.h>

#if __has_include("lf/agent/worker_watch.h")
#include "lf/common/heartbeat_line.h"
#endif

namespace lf::agent {

#if __has_include("lf/agent/worker_watch.h")
// Worker heartbeats with payloads (wt/heartbeat: WorkerGroup::status(), WorkerWatch).
std::vector<metrics::RankReport> rank_reports(const WorkerGroup& group, const rdzv::LayoutMsg&) {
  std::vector<metrics::RankReport> out;
  for (const WorkerStatus& w : group.status()) {
    metrics::RankReport r;
    r.rank = w.global_rank;
    r.local_rank = w.local_rank;
    r.pid = w.pid;
    r.alive = w.alive;
    r.heard = w.heartbeat.heard;
    r.progress = w.heartbeat.progress;
    if (r.progress) r.phase = phase_name(w.heartbeat.phase);
    r.step = w.heartbeat.step;
    r.metrics_json = w.heartbeat.metrics_json;
    r.since_beat_s = w.heartbeat.since_beat_s;
    r.since_progress_s = w.heartbeat.since_progress_s;
    out.push_back(std::move(r));
  }
  return out;
}
#else
// Before worker heartbeats carry payloads: ranks, pids and liveness only (the lf_train_*
// series stay absent). Remove this branch once wt/heartbeat is merged.
std::vector<metrics::RankReport> rank_reports(const WorkerGroup& group, const rdzv::LayoutMsg& layout) {
  std::vector<metrics::RankReport> out;
  const auto pids = group.pids();
  for (size_t i = 0; i < pids.size(); ++i) {
    metrics::RankReport r;
    r.local_rank = static_cast<int>(i);
    r.rank = static_cast<int>(layout.rank_base) + r.local_rank;
    r.pid = pids[i];
    r.alive = pids[i] > 0 && ::kill(pids[i], 0) == 0;
    out.push_back(std::move(r));
  }
  return out;
}
#endif

}  // namespace lf::agent
