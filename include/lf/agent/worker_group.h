#pragma once
// The workers of one node for one generation: spawns them, relays their
// output, watches their optional heartbeat channel (worker_watch.h), learns of their exits
// (reap() on SIGCHLD) and stops them (SIGTERM to each process group, SIGKILL
// after a grace period). Threading: the agent's io thread only.
#include <boost/asio/io_context.hpp>
#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lf/agent/worker_process.h"
#include "lf/agent/worker_watch.h"

namespace lf::agent {

struct WorkerGroupOptions {
  std::string log_dir;        // per-rank stdout/stderr files under it; empty: none
  bool console = true;        // false with --redirect: files only
  double stop_grace_s = 5;
  // Liveness (worker_watch.h): a worker silent this long after its first beat has hung; 0: off.
  // Progress deadlines come from the workers' own beats.
  double liveness_timeout_s = 10;
};

struct WorkerExit {
  int local_rank = 0;
  int global_rank = 0;
  int exit_code = 0;  // valid when signal == 0
  int signal = 0;
  std::string describe() const;
};

struct WorkerStatus {
  int local_rank = 0;
  int global_rank = 0;
  pid_t pid = -1;
  bool alive = false;
  HeartbeatStatus heartbeat;
  std::optional<WorkerExit> exit;  // once it ended
  std::string last_line;           // the last line it wrote (stdout or stderr)
};

// A line a worker wrote, for node 0's live page (the console and log files get every line).
struct OutputLine {
  int global_rank = 0;
  bool err = false;
  std::string text;
};

class WorkerGroup {
 public:
  using ExitHandler = std::function<void(const WorkerExit&)>;
  // Called once per hung worker; `why` names the timeout, the last phase and step, and seconds.
  using HangHandler = std::function<void(int local_rank, int global_rank, pid_t pid, const std::string& why)>;

  WorkerGroup(boost::asio::io_context& io, WorkerGroupOptions options);
  ~WorkerGroup();
  // specs[i] is local rank i with global rank global_ranks[i].
  void start(std::vector<SpawnSpec> specs, std::vector<int> global_ranks, const std::string& attempt_dir,
             ExitHandler on_exit, HangHandler on_hang);
  // Collects exited children (call on SIGCHLD). Returns true if any was ours.
  bool reap();
  // Signals every live worker's group with first_signal, SIGKILLs after the
  // grace period, and calls done once all are reaped.
  void stop(int first_signal, std::function<void()> done);
  // SIGKILL to every worker group now (a second Ctrl-C).
  void kill_now();
  bool any_alive() const;
  std::vector<pid_t> pids() const;
  // Each worker's last heartbeat and payload (for logs and the metrics exporter).
  std::vector<WorkerStatus> status() const;
  // The lines the workers wrote since the last call, at most kKeptLines per worker (the
  // oldest go first; each line at most kMaxKeptLine bytes).
  std::vector<OutputLine> take_lines();
  static constexpr size_t kKeptLines = 200;
  static constexpr size_t kMaxKeptLine = 2000;
  // The progress beats of global rank `rank` since the last call (empty when not ours).
  std::vector<ProgressBeat> take_beats(int global_rank);

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// Nothing a worker started outlives the job: SIGKILL to what is left in the workers' process
// groups (group may be null), and to what left them (setsid) and came to this agent, a child
// subreaper, when its parent died. Killing those may hand over their own children in turn: a
// few rounds.
void kill_leftovers(WorkerGroup* group);

}  // namespace lf::agent
