#include "doctor_command.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "agent_flags.h"
#include "lf/common/env.h"
#include "lf/common/error.h"
#include "lf/config/train_config.h"
#include "lf/doctor/doctor.h"

namespace lf {

namespace {

struct DoctorFlags {
  LaunchFlags job;
  std::vector<std::string> args;  // CONFIG, then key=value
  bool all_nodes = false, json = false;
  double timeout_s = 60, connect_timeout_s = 3;
  int64_t probe_port = 0;
};

int run_doctor(DoctorFlags& f) {
  apply_environment(f.job);
  const auto& o = f.job.opt;
  doctor::DoctorContext ctx = doctor::context_from_env();
  ctx.nnodes = o.max_nodes;
  ctx.node_rank = o.node_rank;
  ctx.nproc = o.nproc;
  ctx.nproc_given = f.job.nproc > 0 || env_string("NPROC_PER_NODE").has_value();
  ctx.master_addr = o.master_addr;
  ctx.master_port = o.master_port;
  ctx.rdzv_id = o.rdzv_id;
  ctx.token = o.token;
  ctx.all_nodes_timeout_s = f.timeout_s;
  ctx.connect_timeout_s = f.connect_timeout_s;
  LF_CHECK(f.probe_port >= 0 && f.probe_port < 65536, ConfigError, "--probe-port {} is not a TCP port", f.probe_port);
  ctx.probe_port = static_cast<uint16_t>(f.probe_port);
  doctor::Report report;
  if (!f.args.empty()) {
    ctx.config_path = f.args.front();
    try {
      auto loaded = config::load_train_config(ctx.config_path,
                                              std::vector<std::string>(f.args.begin() + 1, f.args.end()));
      for (const auto& w : loaded.warnings) report.warn("config-warning", w, "the job runs, but this key does not do what it says there");
      for (const auto& n : loaded.notes) report.info("config-note", n);
      ctx.config = std::move(loaded.plan);
    } catch (const Error& e) {
      ctx.config_error = e.what();
    }
  }
  doctor::NodeFacts facts;
  doctor::run_node_checks(ctx, report, facts, f.all_nodes && ctx.nnodes > 1);
  if (f.all_nodes && ctx.nnodes > 1) doctor::run_all_nodes(ctx, report, facts);
  const std::string node = ctx.node_rank >= 0 ? std::to_string(ctx.node_rank) : "?";
  if (f.json) {
    std::fputs(report.json(node, facts.hostname).c_str(), stdout);
  } else {
    std::fputs(report.text(fmt::format("lf-train doctor: node {} of {} ({}), MASTER_ADDR {}:{}{}", node, ctx.nnodes,
                                       facts.hostname, ctx.master_addr, ctx.master_port,
                                       ctx.config_path.empty() ? "" : ", config " + ctx.config_path))
                   .c_str(),
               stdout);
  }
  std::fflush(stdout);
  return report.any_fail() ? kExitConfig : kExitOk;
}

}  // namespace

void add_doctor_command(CLI::App& app) {
  auto f = std::make_shared<DoctorFlags>();
  auto* cmd = app.add_subcommand("doctor", "Check this node (and with --all-nodes every node) before a job: GPUs, "
                                           "/dev/shm, ulimits, NCCL variables, MASTER_ADDR/PORT, the config's files");
  auto& j = f->job;
  cmd->add_option("args", f->args, "CONFIG.yaml, then key=value overrides (optional)");
  cmd->add_flag("--all-nodes", f->all_nodes, "Run on every node at once: compare the nodes and test TCP between them");
  cmd->add_flag("--json", f->json, "One JSON object instead of lines (for scripts)");
  cmd->add_option("--timeout", f->timeout_s, "--all-nodes: seconds to wait for the other nodes (default 60)");
  cmd->add_option("--connect-timeout", f->connect_timeout_s, "Seconds per TCP probe (default 3)");
  cmd->add_option("--probe-port", f->probe_port, "--all-nodes: the port each node listens on for the TCP mesh test "
                                                 "(default: any free one)");
  cmd->add_option("--nnodes", j.nnodes, "Number of nodes (env NNODES; default 1)");
  cmd->add_option("--node-rank,--node_rank", j.node_rank, "This node's rank (env NODE_RANK)");
  cmd->add_option("--nproc-per-node,--nproc_per_node", j.nproc, "Workers on this node (env NPROC_PER_NODE)");
  cmd->add_option("--master-addr,--master_addr", j.master_addr, "Node 0's address (env MASTER_ADDR)");
  cmd->add_option("--master-port,--master_port", j.master_port, "Rendezvous port (env MASTER_PORT; default 29500)");
  cmd->add_option("--rdzv-id,--rdzv_id", j.rdzv_id, "Job id (env RDZV_ID)");
  cmd->callback([f] { throw CLI::RuntimeError(run_doctor(*f)); });
}

}  // namespace lf
