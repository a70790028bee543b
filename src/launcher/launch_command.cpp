#include "launch_command.h"

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lf/agent/agent.h"
#include "lf/common/env.h"
#include "lf/common/env_knobs.h"
#include "lf/common/error.h"
#include "lf/common/job_token.h"
#include "lf/rendezvous/bind_address.h"
#include "lf/common/hash.h"
#include "lf/common/version.h"
#include "lf/rendezvous/server.h"
#include "agent_flags.h"
#include "ssh_fanout.h"
#include "torchrun_flags.h"

namespace lf {

void add_launch_command(CLI::App& app) {
  auto flags = std::make_shared<LaunchFlags>();
  auto torchrun = std::make_shared<TorchrunFlags>();
  auto* cmd = app.add_subcommand("launch", "Run CMD on every worker of every node (torchrun-compatible environment)");
  add_agent_flags(cmd, *flags);
  add_torchrun_flags(cmd, *torchrun);
  auto& o = flags->opt;
  cmd->add_option("command", o.command, "The program and its arguments, after -- (a .py script runs with python3)")
      ->required();
  cmd->callback([flags, torchrun] {
    apply_torchrun_flags(*torchrun, *flags);
    if (!flags->hostfile.empty()) throw CLI::RuntimeError(run_hostfile(*flags));
    apply_environment(*flags);
    auto& opt = flags->opt;
    opt.command = with_python_for_scripts(std::move(opt.command), torchrun->no_python);
    std::string joined, shown;
    for (auto& a : opt.command) {
      joined += a + '\0';
      shown += (shown.empty() ? "" : " ") + a;
    }
    opt.config_hash = hex64(fnv1a64(joined));
    opt.config_items = {"command=" + shown};
    throw CLI::RuntimeError(agent::run_agent(opt));
  });
}

void add_rdzv_server_command(CLI::App& app) {
  auto so = std::make_shared<rdzv::ServerOptions>();
  auto nnodes = std::make_shared<std::string>();
  auto port = std::make_shared<int64_t>(0);
  auto host = std::make_shared<std::string>();
  auto bind_all = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("rdzv-server", "Run only the rendezvous server (agents then join without NODE_RANK)");
  cmd->add_option("--host", *host, "The address the agents reach it at, which it listens on (env MASTER_ADDR; "
                                   "default 127.0.0.1)");
  cmd->add_flag("--bind-all", *bind_all, "Listen on every address, not only --host's");
  cmd->add_option("--nnodes", *nnodes, "Number of nodes, N or MIN:MAX (env NNODES)");
  auto* port_flag = cmd->add_option("--port", *port, "Port (env MASTER_PORT; default 29500; 0: a free one)");
  cmd->add_option("--rdzv-id", so->job_id, "Job id (env RDZV_ID)");
  auto* restarts_flag =
      cmd->add_option("--max-restarts", so->max_restarts, "Restarts after a failure (env MAX_RESTARTS)");
  cmd->add_option("--last-call", so->last_call_s, "With MIN:MAX: seconds to wait for more nodes once MIN joined");
  cmd->add_option("--event-log", so->event_log_path, "Append events (JSON lines) to FILE");
  add_timing_flags(cmd, &so->join_timeout_s, &so->heartbeat_interval_s, &so->heartbeat_timeout_s);
  add_status_flag(cmd, &so->status_interval_s);
  cmd->callback([so, nnodes, port, port_flag, restarts_flag, host, bind_all] {
    auto nn = parse_nnodes(!nnodes->empty() ? *nnodes : env_string("NNODES").value_or("1"));
    so->min_nodes = nn.first;
    so->max_nodes = nn.second;
    // A flag given wins over the environment, 0 included (--port 0: any free port).
    const int64_t p = port_flag->count() ? *port : env_int("MASTER_PORT").value_or(29500);
    LF_CHECK(p >= 0 && p <= 65535, ConfigError, "rdzv-server port {} is not a TCP port (0-65535)", p);
    so->port = static_cast<uint16_t>(p);
    if (so->job_id == "none") so->job_id = env_string("RDZV_ID").value_or("none");
    if (!restarts_flag->count()) so->max_restarts = env_int("MAX_RESTARTS").value_or(0);
    so->token = job_token_from_env();
    so->version = kVersion;
    const auto bind = rdzv::choose_bind_address(!host->empty() ? *host : env_string("MASTER_ADDR").value_or("127.0.0.1"),
                                                so->max_nodes, *bind_all);
    so->bind_host = bind.address;
    so->advertised_addr = !host->empty() ? *host : env_string("MASTER_ADDR").value_or("127.0.0.1");
    boost::asio::io_context io;
    rdzv::RendezvousServer server(io, *so);
    int code = kExitInternal;
    server.start([&](int c, const std::string& reason) {
      code = c;
      spdlog::info("job over: {}", reason);
      server.shutdown(2.0, [&] { io.stop(); });
    });
    // Print the bound port on stdout so scripts can use --port 0.
    fmt::print("lf-train rendezvous server listening on port {} of {} ({})\n", server.port(), server.bound_address(),
               bind.why);
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
