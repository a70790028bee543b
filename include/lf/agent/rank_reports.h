#pragma once
// The adapter from the agent's workers to the metrics exporter (lf/metrics/rank_report.h):
// each local worker's rank, pid, liveness and last heartbeat payload. Threading: the
// agent's io thread (where the WorkerGroup lives).
#include <vector>

#include "lf/agent/worker_group.h"
#include "lf/metrics/rank_report.h"
#include "lf/rendezvous/messages.h"

namespace lf::agent {

std::vector<metrics::RankReport> rank_reports(const WorkerGroup& group, const rdzv::LayoutMsg& layout);

}  // namespace lf::agent
