#include "lf/agent/rank_reports.h"

#include "lf/common/heartbeat_line.h"

namespace lf::agent {

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

}  // namespace lf::agent
