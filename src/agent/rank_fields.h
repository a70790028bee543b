#pragma once
// One worker's fields as both per-rank records carry them: the page's rdzv::RankStatus
// (status_reporter.cpp) and the metrics endpoint's metrics::RankReport (rank_reports.cpp) have the
// same names for them, so they are filled in one place.
#include "lf/agent/worker_group.h"
#include "lf/common/heartbeat_line.h"

namespace lf::agent {

template <class Record>
void fill_rank_fields(Record& r, const WorkerStatus& w) {
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
}

}  // namespace lf::agent
