#pragma once
// What the metrics exporter knows of one worker: the narrow interface between the agent
// (which owns the workers and their heartbeat channels) and src/metrics. The agent builds
// these on its io thread (agent/rank_reports.h is the adapter from WorkerGroup's
// status()); metrics_json is the last progress beat's "metrics" object, as the worker sent
// it (lf/common/heartbeat_line.h: loss, learning_rate, grad_norm, epoch, tokens_per_s,
// step_s, comm_exposed_s, eval_loss, checkpoint_s, and mfu once a worker sends it).
#include <cstdint>
#include <string>

namespace lf::metrics {

struct RankReport {
  int rank = 0;        // global rank
  int local_rank = 0;
  int64_t pid = -1;
  bool alive = false;
  bool heard = false;     // any heartbeat so far
  bool progress = false;  // any progress beat so far (phase, step, metrics_json are from the last one)
  std::string phase;      // loading, tokenizing, training, evaluating, saving, done
  int64_t step = 0;       // last finished optimizer step
  std::string metrics_json = "{}";
  double since_beat_s = 0;      // since any heartbeat
  double since_progress_s = 0;  // since the last progress beat
};

}  // namespace lf::metrics
