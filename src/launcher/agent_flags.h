#pragma once
// The node-agent flags shared by `lf-train launch` and `lf-train train`, with
// LLaMA-Factory's environment fallbacks (NNODES, NODE_RANK, NPROC_PER_NODE,
// MASTER_ADDR, MASTER_PORT, MAX_RESTARTS, RDZV_ID, LF_JOB_TOKEN).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lf/agent/agent.h"

namespace CLI {
class App;
}

namespace lf {

struct LaunchFlags {
  std::string nnodes;
  int64_t node_rank = -1;
  int64_t nproc = 0;
  std::string master_addr;
  int64_t master_port = -1;  // -1: unset; 0: any free port (single node only)
  int64_t max_restarts = -1;
  std::string rdzv_id;
  int64_t metrics_port = -1;  // -1: unset (LF_METRICS_PORT, else off)
  int64_t ui_port = -1;       // -1: unset (LF_UI_PORT, else off)
  double worker_heartbeat_timeout_s = -1;  // -1: unset
  std::string hostfile;          // --hostfile: start every host's agent over ssh from here
  std::vector<std::string> env;  // --env NAME[=VALUE]: also forwarded to every host
  agent::AgentOptions opt;
};

// "N" or "MIN:MAX" (torchrun's --nnodes).
std::pair<int64_t, int64_t> parse_nnodes(const std::string& s);
// Adds every agent flag to cmd, writing into flags.
void add_agent_flags(CLI::App* cmd, LaunchFlags& flags);
void add_timing_flags(CLI::App* cmd, double* join_timeout, double* hb_interval, double* hb_timeout);
void add_status_flag(CLI::App* cmd, double* status_interval);
// Flags win; then the environment; then defaults. Fills flags.opt (not the command).
void apply_environment(LaunchFlags& flags);
// --hostfile: this command on every host of the file over ssh (ssh_fanout.h); the exit code.
int run_hostfile(const LaunchFlags& flags);

}  // namespace lf
