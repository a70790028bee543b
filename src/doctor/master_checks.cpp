// MASTER_ADDR / MASTER_PORT as `nc -zv master 29500` checks them: resolvable; on node 0 the
// port is free for the rendezvous server (naming who holds it); on another node the master
// answers on it, or at least refuses (host reachable, node 0 not started yet) instead of
// dropping packets (a firewall).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lf/doctor/doctor.h"
#include "lf/doctor/net_probe.h"

namespace lf::doctor {

namespace {

bool hosts_the_server(const DoctorContext& ctx) {
  return ctx.node_rank == 0 || (ctx.node_rank < 0 && (ctx.nnodes == 1 || is_local_address(ctx.master_addr)));
}

// The rendezvous port of a multi-node job on an address other hosts reach: without a token,
// whoever reaches it can try to join (a stranger is refused, but a token refuses it unheard).
void check_job_token(const DoctorContext& ctx, const std::vector<std::string>& addrs, Report& report) {
  bool loopback = true;
  for (const auto& a : addrs) loopback &= a.rfind("127.", 0) == 0 || a == "::1";
  if (ctx.nnodes <= 1 || loopback) return;
  if (!ctx.token.empty())
    return report.pass("job-token", "a job token is set (LF_JOB_TOKEN / LF_JOB_TOKEN_FILE): only nodes with it join");
  report.warn("job-token",
              fmt::format("a {}-node job on MASTER_ADDR={} (not a loopback address) without a job token: whoever "
                          "reaches port {} can try to join it", ctx.nnodes, ctx.master_addr, ctx.master_port),
              "set the same LF_JOB_TOKEN (or LF_JOB_TOKEN_FILE) on every node, e.g. `export LF_JOB_TOKEN=$(openssl "
              "rand -hex 16)` where the job's nodes are started; --hostfile makes one by itself");
}

}  // namespace

void check_master(const DoctorContext& ctx, Report& report, bool all_nodes) {
  std::string error;
  const auto addrs = resolve(ctx.master_addr, &error);
  if (addrs.empty())
    return report.fail("master-addr", fmt::format("MASTER_ADDR={} does not resolve: {}", ctx.master_addr, error),
                       "use node 0's IP address, or a name every node resolves (/etc/hosts, DNS)");
  const bool host = hosts_the_server(ctx);
  if (host && ctx.nnodes > 1 && !is_local_address(ctx.master_addr))
    report.fail("master-addr",
                fmt::format("this is node 0 but MASTER_ADDR={} ({}) is not an address of this host", ctx.master_addr,
                            fmt::join(addrs, ", ")),
                "on node 0 MASTER_ADDR must be one of its own addresses (`ip -br addr`), the one the others reach");
  else
    report.pass("master-addr", fmt::format("MASTER_ADDR={} resolves to {}", ctx.master_addr, fmt::join(addrs, ", ")));
  check_job_token(ctx, addrs, report);
  if (host) {
    // With --all-nodes the doctors' own rendezvous binds the port next (all_nodes.cpp).
    if (all_nodes) return;
    std::string why;
    if (can_bind(ctx.master_port, &why)) {
      report.pass("master-port", fmt::format("MASTER_PORT {} is free on this node (node 0)", ctx.master_port));
    } else {
      const auto owner = port_owner(ctx.master_port, ctx.proc_root);
      report.fail("master-port",
                  fmt::format("MASTER_PORT {} is in use on node 0{}: {}", ctx.master_port,
                              owner.empty() ? "" : " by " + owner, why),
                  "stop that process (an earlier lf-train / torchrun still running?) or choose another MASTER_PORT on "
                  "every node");
    }
    return;
  }
  const auto c = tcp_connect(ctx.master_addr, ctx.master_port, ctx.connect_timeout_s);
  const std::string target = fmt::format("{}:{} ({})", ctx.master_addr, ctx.master_port, c.address);
  switch (c.result) {
    case ConnectResult::kConnected:
      report.pass("master-port", fmt::format("{} answers (node 0 is running)", target));
      break;
    case ConnectResult::kRefused:
      report.pass("master-port", fmt::format("{} is reachable; nothing listens there yet (node 0 not started: fine "
                                             "before the job starts)", target));
      break;
    case ConnectResult::kTimeout:
      report.fail("master-port", fmt::format("{}: no answer within {:.0f} s: packets are dropped (a firewall, a "
                                             "security group) or the host is down", target, ctx.connect_timeout_s),
                  fmt::format("open TCP port {} on node 0 to this node (and the other ports NCCL uses between nodes); "
                              "`lf-train doctor --all-nodes` checks every pair", ctx.master_port));
      break;
    default:
      report.fail("master-port", fmt::format("{}: {}", target, c.error),
                  "check the route to node 0 (`ip route get <addr>`) and that MASTER_ADDR is its address as seen from "
                  "here");
  }
}

}  // namespace lf::doctor
