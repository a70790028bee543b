#include "lf/rendezvous/job_record.h"

namespace lf::rdzv {

void JobRecord::round_formed(std::vector<NodeRecord> nodes) {
  // A node that stays keeps its last status until its next one.
  std::map<int64_t, NodeRecord> next;
  for (auto& n : nodes) {
    auto old = nodes_.find(n.node_rank);
    if (old != nodes_.end() && old->second.hostname == n.hostname && old->second.pid == n.pid) {
      n.status = std::move(old->second.status);
      n.status_at = old->second.status_at;
    }
    next[n.node_rank] = std::move(n);
  }
  nodes_ = std::move(next);
  ++version_, ++milestones_;
}

void JobRecord::status(int64_t node_rank, NodeStatusMsg&& s, RecordClock::time_point now) {
  for (auto& p : s.points) add_point(std::move(p));
  for (auto& l : s.lines) {
    auto& ring = lines_[l.rank];
    ring.push_back(std::move(l));
    if (ring.size() > kLinesPerRank) ring.pop_front();
  }
  s.points.clear();
  s.lines.clear();
  auto it = nodes_.find(node_rank);
  if (it != nodes_.end()) {
    it->second.status = std::move(s);
    it->second.status_at = now;
  }
  ++version_;
}

void JobRecord::add_point(StepPoint&& p) {
  // A restart resumed below what was drawn: the points from there on belong to the run that failed.
  while (!points_.empty() && points_.back().step > p.step) points_.pop_back();
  if (!points_.empty() && points_.back().step == p.step) {
    points_.back() = std::move(p);  // the step's later beat (evaluating, saving) carries more
    return;
  }
  points_.push_back(std::move(p));
  if (points_.size() <= kMaxPoints) return;
  // Keep the curve's shape over the whole run in bounded memory: every other point of the older half.
  std::vector<StepPoint> thinned;
  thinned.reserve(kMaxPoints);
  const size_t half = points_.size() / 2;
  for (size_t i = 0; i < points_.size(); ++i)
    if (i >= half || i % 2 == 0) thinned.push_back(std::move(points_[i]));
  points_ = std::move(thinned);
}

void JobRecord::failure(FailureRecord f) {
  failures_.push_back(std::move(f));
  ++version_, ++milestones_;
}

void JobRecord::node_lost(int64_t node_rank, const std::string& why) {
  auto it = nodes_.find(node_rank);
  if (it == nodes_.end() || !it->second.connected) return;
  it->second.connected = false;
  it->second.lost = why;
  ++version_, ++milestones_;
}

void JobRecord::node_done(int64_t node_rank) {
  auto it = nodes_.find(node_rank);
  if (it == nodes_.end()) return;
  it->second.done = true;
  ++version_, ++milestones_;
}

const std::deque<LogLine>& JobRecord::lines(int64_t rank) const {
  static const std::deque<LogLine> kNone;
  auto it = lines_.find(rank);
  return it == lines_.end() ? kNone : it->second;
}

std::vector<int64_t> JobRecord::ranks_with_lines() const {
  std::vector<int64_t> out;
  for (const auto& [rank, ring] : lines_) out.push_back(rank);
  return out;
}

}  // namespace lf::rdzv
