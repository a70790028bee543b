#include "launch_command.h"

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lf/agent/agent.h"
#include "lf/common/env.h"
#include "lf/common/error.h"
#include "lf/common/hash.h"
#include "lf/common/version.h"
#include "lf/rendezvous/server.h"

namespace lf {

namespace {

// "N" or "MIN:MAX" (torchrun's --nnodes).
std::pair<int64_t, int64_t> parse_nnodes(const std::string& s) {
  auto parse = [&](const std::string& part) {
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(part, &used);
    } catch (const std::exception&) {
    }
    LF_CHECK(used == part.size() && v >= 1, ConfigError, "--nnodes / NNODES '{}' must be N or MIN:MAX with N >= 1", s);
    return v;
  };
  auto colon = s.find(':');
  if (colon == std::string::npos) {
    int64_t n = parse(s);
    return {n, n};
  }
  int64_t lo = parse(s.substr(0, colon)), hi = parse(s.substr(colon + 1));
  LF_CHECK(lo <= hi, ConfigError, "--nnodes {}: MIN must not exceed MAX", s);
  return {lo, hi};
}

struct LaunchFlags {
  std::string nnodes;
  int64_t node_rank = -1;
  int64_t nproc = 0;
  std::string master_addr;
  int64_t master_port = 0;
  int64_t max_restarts = -1;
  std::string rdzv_id;
  agent::AgentOptions opt;
};

// Flags win; then LLaMA-Factory's variables; then defaults.
void apply_environment(LaunchFlags& f) {
  auto& o = f.opt;
  auto nn = parse_nnodes(!f.nnodes.empty() ? f.nnodes : env_string("NNODES").value_or("1"));
  o.min_nodes = nn.first;
  o.max_nodes = nn.second;
  o.node_rank = f.node_rank >= 0 ? f.node_rank : env_int("NODE_RANK").value_or(-1);
  o.nproc = f.nproc > 0 ? f.nproc : env_int("NPROC_PER_NODE").value_or(1);
  o.master_addr = !f.master_addr.empty() ? f.master_addr : env_string("MASTER_ADDR").value_or("127.0.0.1");
  int64_t port = f.master_port > 0 ? f.master_port : env_int("MASTER_PORT").value_or(29500);
  LF_CHECK(port > 0 && port < 65536, ConfigError, "MASTER_PORT {} is not a TCP port", port);
  o.master_port = static_cast<uint16_t>(port);
  o.max_restarts = f.max_restarts >= 0 ? f.max_restarts : env_int("MAX_RESTARTS").value_or(0);
  o.rdzv_id = !f.rdzv_id.empty() ? f.rdzv_id : env_string("RDZV_ID").value_or("none");
  o.token = env_string("LF_JOB_TOKEN").value_or("");
  LF_CHECK(o.nproc >= 1, ConfigError, "--nproc-per-node / NPROC_PER_NODE must be >= 1, got {}", o.nproc);
  LF_CHECK(o.node_rank < o.max_nodes, ConfigError, "NODE_RANK {} is out of range for NNODES {} (ranks 0..{})",
           o.node_rank, o.max_nodes, o.max_nodes - 1);
  LF_CHECK(!o.redirect || !o.log_dir.empty(), ConfigError, "--redirect needs --log-dir (where the output goes)");
  o.host_server = o.node_rank == 0 || (o.node_rank < 0 && o.max_nodes == 1);
}

void add_timing_flags(CLI::App* cmd, double* join_timeout, double* hb_interval, double* hb_timeout) {
  cmd->add_option("--join-timeout", *join_timeout, "Seconds to wait for every node to join (default 300)");
  cmd->add_option("--heartbeat-interval", *hb_interval, "Seconds between heartbeats (default 0.5)");
  cmd->add_option("--heartbeat-timeout", *hb_timeout,
                  "Seconds of silence after which a node (or the server) counts as dead (default 3)");
}

}  // namespace

void add_launch_command(CLI::App& app) {
  auto flags = std::make_shared<LaunchFlags>();
  auto* cmd = app.add_subcommand("launch", "Run CMD on every worker of every node (torchrun-compatible environment)");
  auto& o = flags->opt;
  cmd->add_option("--nnodes", flags->nnodes, "Number of nodes, N or MIN:MAX (env NNODES; default 1)");
  cmd->add_option("--node-rank", flags->node_rank, "This node's rank (env NODE_RANK; default: by arrival)");
  cmd->add_option("--nproc-per-node", flags->nproc, "Workers on this node (env NPROC_PER_NODE; default 1)");
  cmd->add_option("--master-addr", flags->master_addr, "Rendezvous host, node 0 (env MASTER_ADDR; default 127.0.0.1)");
  cmd->add_option("--master-port", flags->master_port, "Rendezvous port (env MASTER_PORT; default 29500)");
  cmd->add_option("--max-restarts", flags->max_restarts, "Restarts of the whole job after a failure (env MAX_RESTARTS; default 0)");
  cmd->add_option("--rdzv-id", flags->rdzv_id, "Job id, the same on every node (env RDZV_ID; default none)");
  cmd->add_option("--log-dir", o.log_dir, "Write each rank's stdout/stderr under DIR/<rdzv-id>/attempt_<n>/<rank>/");
  cmd->add_flag("--redirect", o.redirect, "Worker output to the log files only (needs --log-dir)");
  bool tee = false;
  cmd->add_flag("--tee", tee, "Worker output to the console and the log files (the default with --log-dir)");
  add_timing_flags(cmd, &o.join_timeout_s, &o.heartbeat_interval_s, &o.heartbeat_timeout_s);
  cmd->add_option("--last-call", o.last_call_s, "With MIN:MAX nodes: seconds to wait for more once MIN joined (default 5)");
  cmd->add_option("--stop-grace", o.stop_grace_s, "Seconds between SIGTERM and SIGKILL when stopping workers (default 5)");
  cmd->add_option("--worker-heartbeat-timeout", o.worker_heartbeat_timeout_s,
                  "A worker that heartbeated on LF_HEARTBEAT_FD and then goes silent this long counts as failed (0: off)");
  cmd->add_option("--event-log", o.event_log, "Node 0: append the rendezvous server's events (JSON lines) to FILE");
  cmd->add_option("command", o.command, "The program and its arguments, after --")->required();
  cmd->callback([flags] {
    apply_environment(*flags);
    auto& opt = flags->opt;
    std::string joined;
    for (auto& a : opt.command) joined += a + '\0';
    opt.config_hash = hex64(fnv1a64(joined));
    throw CLI::RuntimeError(agent::run_agent(opt));
  });
}

void add_rdzv_server_command(CLI::App& app) {
  auto so = std::make_shared<rdzv::ServerOptions>();
  auto nnodes = std::make_shared<std::string>();
  auto port = std::make_shared<int64_t>(0);
  auto* cmd = app.add_subcommand("rdzv-server", "Run only the rendezvous server (agents then join without NODE_RANK)");
  cmd->add_option("--nnodes", *nnodes, "Number of nodes, N or MIN:MAX (env NNODES)");
  cmd->add_option("--port", *port, "Port (env MASTER_PORT; default 29500)");
  cmd->add_option("--rdzv-id", so->job_id, "Job id (env RDZV_ID)");
  cmd->add_option("--max-restarts", so->max_restarts, "Restarts after a failure (env MAX_RESTARTS)");
  cmd->add_option("--last-call", so->last_call_s, "With MIN:MAX: seconds to wait for more nodes once MIN joined");
  cmd->add_option("--event-log", so->event_log_path, "Append events (JSON lines) to FILE");
  add_timing_flags(cmd, &so->join_timeout_s, &so->heartbeat_interval_s, &so->heartbeat_timeout_s);
  cmd->callback([so, nnodes, port] {
    auto nn = parse_nnodes(!nnodes->empty() ? *nnodes : env_string("NNODES").value_or("1"));
    so->min_nodes = nn.first;
    so->max_nodes = nn.second;
    int64_t p = *port > 0 ? *port : env_int("MASTER_PORT").value_or(29500);
    so->port = static_cast<uint16_t>(p);
    if (so->job_id == "none") so->job_id = env_string("RDZV_ID").value_or("none");
    if (so->max_restarts == 0) so->max_restarts = env_int("MAX_RESTARTS").value_or(0);
    so->token = env_string("LF_JOB_TOKEN").value_or("");
    so->version = kVersion;
    boost::asio::io_context io;
    rdzv::RendezvousServer server(io, *so);
    int code = kExitInternal;
    server.start([&](int c, const std::string& reason) {
      code = c;
      spdlog::info("job over: {}", reason);
      server.shutdown(2.0, [&] { io.stop(); });
    });
    // Print the bound port on stdout so scripts can use --port 0.
    fmt::print("lf-train rendezvous server listening on port {}\n", server.port());
    std::fflush(stdout);
    boost::asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](boost::system::error_code ec, int sig) {
      if (ec) return;
      code = 128 + sig;
      server.shutdown(1.0, [&] { io.stop(); });
    });
    io.run();
    throw CLI::RuntimeError(code);
  });
}

}  // namespace lf
