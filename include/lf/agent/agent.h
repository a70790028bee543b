#pragma once
// The node agent: joins the rendezvous (hosting the server on node 0), spawns
// this node's workers for each generation, reports failures, obeys aborts and
// restarts, and exits with a documented code (exit_codes.h).
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace lf::agent {

struct AgentOptions {
  int64_t min_nodes = 1;
  int64_t max_nodes = 1;
  int64_t node_rank = -1;  // -1: assigned by the server in arrival order
  int64_t nproc = 1;
  std::string master_addr = "127.0.0.1";
  uint16_t master_port = 29500;
  int64_t max_restarts = 0;
  std::string rdzv_id = "none";
  std::string token;
  bool host_server = false;  // run the rendezvous server in this process
  // The hosted server listens on the address MASTER_ADDR resolves to here (lf/rendezvous/
  // bind_address.h); --rdzv-bind-all: on every address.
  bool rdzv_bind_all = false;
  // Not empty: when this agent hosts the rendezvous (nodes ranked by arrival), it holds this
  // output_dir's lock (lf/common/output_lock.h) for its life, in the name of `output_lock_job`.
  std::string output_lock_dir, output_lock_job;
  // No NODE_RANK, several nodes, MASTER_ADDR an address of this host: host the server unless
  // one already answers there (or another agent takes the port first), else join it.
  bool host_server_if_free = false;
  std::string log_dir;
  bool redirect = false;  // worker output to log files only
  double join_timeout_s = 300;
  double last_call_s = 5;
  double heartbeat_interval_s = 0.5;
  double heartbeat_timeout_s = 3;
  double stop_grace_s = 5;
  // Liveness timeout of workers that heartbeat (worker_watch.h); 0: off. The launcher's
  // --worker-heartbeat-timeout, else LF_WORKER_LIVENESS_TIMEOUT_S, else 10.
  double worker_heartbeat_timeout_s = 10;
  int64_t metrics_port = -1;  // --metrics-port / LF_METRICS_PORT: Prometheus endpoint; -1 off, 0 a free port
  std::string metrics_addr;   // --metrics-addr; empty: LF_METRICS_ADDR, else 127.0.0.1 (this host only)
  // Node 0's live page of the whole job (lf/ui/job_page.h): --ui-port / LF_UI_PORT; -1 off, 0 a
  // free port (printed). Every node then sends its status every ui_status_interval_s.
  int64_t ui_port = -1;
  std::string ui_addr;  // --ui-addr; empty: LF_UI_ADDR, else 127.0.0.1 (this host only; wider: a token)
  double ui_status_interval_s = 1;  // LF_UI_STATUS_INTERVAL_S
  // The page's header (model, method, output_dir, config) and data preview (JSON, computed off
  // the io thread on the first request); empty: none (`lf-train launch`).
  std::vector<std::pair<std::string, std::string>> ui_facts;
  std::function<std::string()> ui_preview;
  std::string event_log;  // the hosted server's event log (JSON lines)
  std::string config_hash;  // fingerprint of the command/config; must agree across nodes
  std::vector<std::string> config_items;  // "key=value" of that config: a mismatch names the keys
  double status_interval_s = 10;  // while the rendezvous waits: a line saying for whom, this often
  std::vector<std::string> command;
};

// Runs until the job ends; returns the process exit code.
int run_agent(const AgentOptions& options);

}  // namespace lf::agent
