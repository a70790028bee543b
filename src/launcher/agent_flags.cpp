#include "agent_flags.h"

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "lf/agent/address_probe.h"
#include "lf/common/env.h"
#include "lf/common/env_knobs.h"
#include "lf/common/error.h"
#include "lf/common/job_token.h"
#include "own_arguments.h"
#include "ssh_fanout.h"

namespace lf {

// "N" or "MIN:MAX" (torchrun's --nnodes).
std::pair<int64_t, int64_t> parse_nnodes(const std::string& s) {
  auto parse = [&](const std::string& part) {
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(part, &used);
    } catch (const std::exception&) {
    }
    LF_CHECK(!part.empty() && used == part.size() && v >= 1, ConfigError,
             "--nnodes / NNODES '{}' must be N or MIN:MAX with N >= 1 (seen '{}' where a whole number >= 1 belongs); "
             "e.g. --nnodes 2, or --nnodes 2:4 for a job that starts on 2 to 4 nodes and goes on with the nodes left "
             "after a node is lost", s, part);
    return v;
  };
  auto colon = s.find(':');
  if (colon == std::string::npos) {
    int64_t n = parse(s);
    return {n, n};
  }
  int64_t lo = parse(s.substr(0, colon)), hi = parse(s.substr(colon + 1));
  LF_CHECK(lo <= hi, ConfigError, "--nnodes {}: MIN must not exceed MAX (MIN {} > MAX {}); write --nnodes {}:{}", s, lo,
           hi, hi, lo);
  return {lo, hi};
}

// LF_WORKER_LIVENESS_TIMEOUT_S (seconds, default 10, 0: off): ten missed beats of a liveness thread
// that beats every second; a loaded 2-core box delays them by milliseconds, not seconds (test_worker_hang): see --worker-heartbeat-timeout.
static double knob_worker_liveness_timeout_s() { return knob_number("LF_WORKER_LIVENESS_TIMEOUT_S").value_or(10); }

// Flags win; then LLaMA-Factory's variables; then defaults.
void apply_environment(LaunchFlags& f) {
  auto& o = f.opt;
  auto nn = parse_nnodes(!f.nnodes.empty() ? f.nnodes : env_string("NNODES").value_or("1"));
  o.min_nodes = nn.first;
  o.max_nodes = nn.second;
  o.node_rank = f.node_rank >= 0 ? f.node_rank : env_int("NODE_RANK").value_or(-1);
  o.nproc = f.nproc > 0 ? f.nproc : env_int("NPROC_PER_NODE").value_or(1);
  o.master_addr = !f.master_addr.empty() ? f.master_addr : env_string("MASTER_ADDR").value_or("127.0.0.1");
  int64_t port = f.master_port >= 0 ? f.master_port : env_int("MASTER_PORT").value_or(29500);
  LF_CHECK(port >= 0 && port < 65536, ConfigError, "MASTER_PORT {} is not a TCP port", port);
  o.master_port = static_cast<uint16_t>(port);
  o.max_restarts = f.max_restarts >= 0 ? f.max_restarts : env_int("MAX_RESTARTS").value_or(0);
  o.rdzv_id = !f.rdzv_id.empty() ? f.rdzv_id : env_string("RDZV_ID").value_or("none");
  o.token = job_token_from_env();
  o.worker_heartbeat_timeout_s =
      f.worker_heartbeat_timeout_s >= 0 ? f.worker_heartbeat_timeout_s : knob_worker_liveness_timeout_s();
  LF_CHECK(o.worker_heartbeat_timeout_s >= 0, ConfigError,
           "--worker-heartbeat-timeout / LF_WORKER_LIVENESS_TIMEOUT_S must be >= 0 seconds (0: off), got {}",
           o.worker_heartbeat_timeout_s);
  o.metrics_port = f.metrics_port >= 0 ? f.metrics_port : knob_int("LF_METRICS_PORT").value_or(-1);
  LF_CHECK(o.metrics_port >= -1 && o.metrics_port < 65536, ConfigError,
           "--metrics-port / LF_METRICS_PORT {} is not a TCP port (expected 0..65535; 0: a free one, printed; unset: "
           "no metrics endpoint)", o.metrics_port);
  o.ui_port = f.ui_port >= 0 ? f.ui_port : knob_int("LF_UI_PORT").value_or(-1);
  LF_CHECK(o.ui_port >= -1 && o.ui_port < 65536, ConfigError,
           "--ui-port / LF_UI_PORT {} is not a TCP port (expected 0..65535; 0: a free one, printed; unset: no live "
           "page)", o.ui_port);
  o.ui_status_interval_s = knob_number("LF_UI_STATUS_INTERVAL_S").value_or(1);
  LF_CHECK(o.ui_status_interval_s > 0, ConfigError,
           "LF_UI_STATUS_INTERVAL_S={} must be a number of seconds > 0 (how often each node tells node 0's live page "
           "its status)", o.ui_status_interval_s);
  LF_CHECK(o.nproc >= 1, ConfigError, "--nproc-per-node / NPROC_PER_NODE must be >= 1, got {}", o.nproc);
  LF_CHECK(o.node_rank < o.max_nodes, ConfigError, "NODE_RANK {} is out of range for NNODES {} (ranks 0..{})",
           o.node_rank, o.max_nodes, o.max_nodes - 1);
  LF_CHECK(!o.redirect || !o.log_dir.empty(), ConfigError, "--redirect needs --log-dir (where the output goes)");
  if (o.min_nodes < o.max_nodes && o.max_restarts == 0)
    spdlog::warn("--nnodes {}:{} with --max-restarts 0 (MAX_RESTARTS): a lost node ends the job; with restarts left "
                 "it goes on with the nodes left (at least {}), so give e.g. --max-restarts 3", o.min_nodes,
                 o.max_nodes, o.min_nodes);
  o.host_server = o.node_rank == 0 || (o.node_rank < 0 && o.max_nodes == 1);
  // No NODE_RANK on several nodes: the agent on MASTER_ADDR's host hosts the server (unless one
  // answers there already); the others join it and get node ranks by arrival.
  o.host_server_if_free = o.node_rank < 0 && o.max_nodes > 1 && agent::is_local_address(o.master_addr);
  // Port 0 (any free port) only works when nobody else has to find the server.
  LF_CHECK(port != 0 || (o.host_server && o.max_nodes == 1), ConfigError,
           "--master-port 0 (any free port) works for a single node only: other nodes could not find it");
}

void add_timing_flags(CLI::App* cmd, double* join_timeout, double* hb_interval, double* hb_timeout) {
  cmd->add_option("--join-timeout", *join_timeout, "Seconds to wait for every node to join (default 300)");
  cmd->add_option("--heartbeat-interval", *hb_interval, "Seconds between heartbeats (default 0.5)");
  cmd->add_option("--heartbeat-timeout", *hb_timeout,
                  "Seconds of silence after which a node (or the server) counts as dead (default 3)");
}

void add_status_flag(CLI::App* cmd, double* status_interval) {
  cmd->add_option("--status-interval", *status_interval,
                  "While the rendezvous waits for nodes: seconds between lines saying who waits for whom (default 10)");
}

void add_agent_flags(CLI::App* cmd, LaunchFlags& flags) {
  auto& o = flags.opt;
  // torchrun's spellings (--nproc_per_node, --node_rank, ...) are accepted as well.
  cmd->add_option("--nnodes", flags.nnodes, "Number of nodes, N or MIN:MAX (env NNODES; default 1)");
  cmd->add_option("--node-rank,--node_rank", flags.node_rank, "This node's rank (env NODE_RANK; default: by arrival)");
  cmd->add_option("--nproc-per-node,--nproc_per_node", flags.nproc, "Workers on this node (env NPROC_PER_NODE; default 1)");
  cmd->add_option("--master-addr,--master_addr", flags.master_addr, "Rendezvous host, node 0 (env MASTER_ADDR; default 127.0.0.1)");
  cmd->add_option("--master-port,--master_port", flags.master_port, "Rendezvous port (env MASTER_PORT; default 29500; 0: any free port, single node)");
  cmd->add_option("--max-restarts,--max_restarts", flags.max_restarts, "Restarts of the whole job after a failure (env MAX_RESTARTS; default 0)");
  cmd->add_option("--rdzv-id,--rdzv_id", flags.rdzv_id, "Job id, the same on every node (env RDZV_ID; default none)");
  cmd->add_option("--log-dir,--log_dir", o.log_dir, "Write each rank's stdout/stderr under DIR/<rdzv-id>/attempt_<n>/<rank>/");
  cmd->add_flag("--redirect", o.redirect, "Worker output to the log files only (needs --log-dir)");
  cmd->add_flag("--tee")->description("Worker output to the console and the log files (the default with --log-dir)");
  add_timing_flags(cmd, &o.join_timeout_s, &o.heartbeat_interval_s, &o.heartbeat_timeout_s);
  add_status_flag(cmd, &o.status_interval_s);
  cmd->add_option("--last-call", o.last_call_s, "With MIN:MAX nodes: seconds to wait for more once MIN joined (default 5)");
  cmd->add_option("--stop-grace", o.stop_grace_s, "Seconds between SIGTERM and SIGKILL when stopping workers (default 5)");
  cmd->add_option("--worker-heartbeat-timeout", flags.worker_heartbeat_timeout_s,
                  "Seconds a worker that heartbeats on LF_HEARTBEAT_FD may go silent before it counts as hung "
                  "(env LF_WORKER_LIVENESS_TIMEOUT_S; default 10; 0: off)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--metrics-port", flags.metrics_port,
                  "Serve Prometheus metrics on this port (env LF_METRICS_PORT; 0: a free port, printed; default off)");
  cmd->add_option("--metrics-addr", o.metrics_addr,
                  "The address the metrics endpoint binds (env LF_METRICS_ADDR; default 127.0.0.1, this host only; "
                  "the node's own address or 0.0.0.0 for a Prometheus on another host)");
  cmd->add_option("--ui-port", flags.ui_port,
                  "Node 0 serves the job's live page on this port: every node, rank and GPU, curves, logs, the data "
                  "preview (env LF_UI_PORT; 0: a free port, printed; default off)");
  cmd->add_option("--ui-addr", o.ui_addr,
                  "The address the live page binds (env LF_UI_ADDR; default 127.0.0.1, this host only; another "
                  "address serves it beyond this host, with a token)");
  cmd->add_flag("--rdzv-bind-all", o.rdzv_bind_all,
                "Node 0: the rendezvous server listens on every address, not only on MASTER_ADDR's (behind NAT or a "
                "load balancer); said in one log line");
  cmd->add_option("--hostfile", flags.hostfile,
                  "Start this command on every host of FILE (DeepSpeed's `HOST slots=N` lines) over ssh; MASTER_ADDR is "
                  "the first host");
  cmd->add_option("--env", flags.env, "With --hostfile: also forward NAME (or NAME=VALUE) to every host; repeatable")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--event-log", o.event_log, "Node 0: append the rendezvous server's events (JSON lines) to FILE");
}

int run_hostfile(const LaunchFlags& f) {
  LF_CHECK(f.nnodes.empty() && f.node_rank < 0, ConfigError,
           "--hostfile sets NNODES and NODE_RANK from the file's lines; leave out --nnodes and --node-rank");
  SshFanoutOptions o;
  o.hosts = read_hostfile(f.hostfile);
  o.args = without_fanout_flags(own_arguments());
  o.env = f.env;
  o.stop_grace_s = f.opt.stop_grace_s;
  o.token = job_token_from_env();
  if (o.token.empty()) {
    o.token = make_job_token();
    spdlog::info("--hostfile: made a job token for this run (no LF_JOB_TOKEN / LF_JOB_TOKEN_FILE): only the nodes "
                 "started here can join the job");
  }
  return run_over_ssh(o);
}

}  // namespace lf
