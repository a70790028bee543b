#include "lf/agent/rank_reports.h"

#include "rank_fields.h"

namespace lf::agent {

std::vector<metrics::RankReport> rank_reports(const WorkerGroup& group, const rdzv::LayoutMsg&) {
  std::vector<metrics::RankReport> out;
  for (const WorkerStatus& w : group.status()) {
    metrics::RankReport r;
    fill_rank_fields(r, w);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace lf::agent
