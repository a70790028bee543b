#pragma once
// What node 0's rendezvous server keeps of the job for its live page (issue 35): every node of
// the current round with its last NodeStatusMsg (ranks, GPUs), whether it is still connected
// and why not, every failure a member reported (rank, exit code or signal, the message), the
// last lines each rank wrote, and global rank 0's progress beats since the job began (the
// curves). The server fills it; JobView (below) is the page's read of it together with the
// server's phase. A lost node stays listed, with its last status, until the next round.
// Threading: the server's io thread only (the page reads it there).
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lf/rendezvous/messages.h"

namespace lf::rdzv {

using RecordClock = std::chrono::steady_clock;

struct NodeRecord {
  int64_t node_rank = 0;
  std::string hostname, address;
  int64_t pid = 0;
  int64_t nproc = 0;
  bool connected = true;
  std::string lost;  // why the connection ended ("" while connected)
  bool done = false;  // every worker of the node exited 0
  std::optional<NodeStatusMsg> status;  // the last one, without its points and lines
  RecordClock::time_point status_at{};
};

struct FailureRecord {
  double wall_time = 0;  // seconds since the epoch
  int64_t generation = 0, node_rank = -1, global_rank = -1, exit_code = 0, signal = 0;
  bool restartable = true;
  std::string message;
};

class JobRecord {
 public:
  static constexpr size_t kLinesPerRank = 200;
  static constexpr size_t kMaxPoints = 20000;  // then the older half is thinned to every other point

  // A round formed: its nodes replace the listed ones (a lost node's entry goes).
  void round_formed(std::vector<NodeRecord> nodes);
  // A member's status: its points and lines move into the job's history.
  void status(int64_t node_rank, NodeStatusMsg&& s, RecordClock::time_point now);
  void failure(FailureRecord f);
  void node_lost(int64_t node_rank, const std::string& why);
  void node_done(int64_t node_rank);

  const std::map<int64_t, NodeRecord>& nodes() const { return nodes_; }
  const std::vector<FailureRecord>& failures() const { return failures_; }
  // Global rank 0's beats, by step (a restart that resumes below the last step drops the
  // points from there on: the curve shows the run that counts).
  const std::vector<StepPoint>& points() const { return points_; }
  // The last kLinesPerRank lines of a global rank (empty when none).
  const std::deque<LogLine>& lines(int64_t rank) const;
  std::vector<int64_t> ranks_with_lines() const;
  // Bumped by every change the page shows (statuses: every node, every interval).
  uint64_t version() const { return version_; }
  // Bumped by the changes a page must show at once: a round, a failure, a node lost or done.
  uint64_t milestones() const { return milestones_; }

 private:
  void add_point(StepPoint&& p);

  std::map<int64_t, NodeRecord> nodes_;
  std::vector<FailureRecord> failures_;
  std::vector<StepPoint> points_;
  std::map<int64_t, std::deque<LogLine>> lines_;
  uint64_t version_ = 0, milestones_ = 0;
};

// The page's read of the server: its phase and the record. Built by RendezvousServer::job_view().
struct JobView {
  std::string job_id;
  std::string phase;  // "joining", "running", "stopping", "finished"
  std::string formed_at;  // UTC, "" before the first round formed
  int64_t generation = 0, restarts = 0, max_restarts = 0, min_nodes = 1, max_nodes = 1, world_size = 0;
  std::optional<int> exit_code;  // once finished: 0 every node done, else the job's failure
  std::string end_reason;
  double heartbeat_timeout_s = 0;
  std::map<int64_t, double> silent_s;  // connected member node -> seconds since its last message
  std::vector<std::string> waiting;    // joined nodes waiting for a round ("node rank 1 (host h, pid 7)")
  const JobRecord* record = nullptr;
};

}  // namespace lf::rdzv
