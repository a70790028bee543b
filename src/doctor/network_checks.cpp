// The NCCL variables that name things on this host: NCCL_SOCKET_IFNAME (interfaces),
// NCCL_IB_HCA (InfiniBand/RoCE adapters and ports, port state from /sys: no ibstat), and
// the switches that trade speed for safety (NCCL_IB_DISABLE, NCCL_P2P_DISABLE).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <set>

#include "lf/doctor/doctor.h"
#include "lf/metrics/net_counters.h"

namespace lf::doctor {

namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::optional<std::string>(v) : std::nullopt;
}

std::string operstate(const DoctorContext& ctx, const std::string& ifname) {
  std::ifstream in(ctx.sys_root + "/class/net/" + ifname + "/operstate");
  std::string s;
  in >> s;
  return s;
}

void check_socket_ifname(const DoctorContext& ctx, Report& report) {
  const auto all = metrics::watched_interfaces(std::string("^="), ctx.sys_root);  // every interface
  const auto spec_text = env("NCCL_SOCKET_IFNAME");
  if (!spec_text) {
    const auto picked = metrics::watched_interfaces(std::string("^docker,lo"), ctx.sys_root);
    report.info("nccl-ifname",
                fmt::format("NCCL_SOCKET_IFNAME unset: NCCL picks among {} (interfaces here: {})",
                            picked.empty() ? std::string("none") : fmt::format("{}", fmt::join(picked, ", ")),
                            fmt::join(all, ", ")));
    return;
  }
  const auto spec = metrics::IfnameSpec::parse(*spec_text);
  const auto matched = metrics::watched_interfaces(spec_text, ctx.sys_root);
  if (matched.empty())
    return report.fail("nccl-ifname",
                       fmt::format("NCCL_SOCKET_IFNAME={} matches no interface on this node (interfaces: {})",
                                   *spec_text, fmt::join(all, ", ")),
                       "name an interface that exists here (`ip -br addr`), the one on the network between the nodes; "
                       "NCCL fails with 'no socket interface found' otherwise");
  // A name that matches nothing is a typo even when another name of the list matches.
  std::vector<std::string> dead;
  if (!spec.exclude)
    for (const auto& n : spec.names) {
      bool hit = false;
      for (const auto& i : all) hit = hit || (spec.exact ? i == n : i.rfind(n, 0) == 0);
      if (!hit) dead.push_back(n);
    }
  std::vector<std::string> down;
  for (const auto& i : matched)
    if (const auto st = operstate(ctx, i); st == "down") down.push_back(i);
  if (!dead.empty() || !down.empty())
    report.warn("nccl-ifname",
                fmt::format("NCCL_SOCKET_IFNAME={} selects {}{}{}", *spec_text, fmt::join(matched, ", "),
                            dead.empty() ? "" : fmt::format("; '{}' matches nothing here", fmt::join(dead, "', '")),
                            down.empty() ? "" : fmt::format("; {} is down", fmt::join(down, ", "))),
                "fix the list: every node reads the same variable, and its interfaces must exist and be up there");
  else
    report.pass("nccl-ifname", fmt::format("NCCL_SOCKET_IFNAME={} selects {}", *spec_text, fmt::join(matched, ", ")));
}

struct HcaEntry {
  std::string name;
  int port = 0;  // 0: every port
};

void check_ib(const DoctorContext& ctx, Report& report) {
  const auto ports = metrics::read_ib_ports(ctx.sys_root);
  const auto hca_text = env("NCCL_IB_HCA");
  const auto ib_disable = env("NCCL_IB_DISABLE");
  const bool disabled = ib_disable && *ib_disable == "1";
  if (disabled && !ports.empty())
    report.warn("nccl-ib-disable",
                fmt::format("NCCL_IB_DISABLE=1 with {} InfiniBand/RoCE port(s) here: NCCL uses TCP sockets between "
                            "nodes instead (often 5-10x less bandwidth)", ports.size()),
                "unset NCCL_IB_DISABLE unless RDMA is known broken here");
  if (ports.empty()) {
    if (hca_text)
      report.fail("nccl-ib-hca", fmt::format("NCCL_IB_HCA={} but this node has no InfiniBand/RoCE device (no "
                                             "{}/class/infiniband)", *hca_text, ctx.sys_root),
                  "unset NCCL_IB_HCA on this node, or install the RDMA driver (rdma-core, the NIC's OFED)");
    return;
  }
  // NCCL_IB_HCA: [^][=]name[:port],... (prefixes unless '=').
  std::vector<const metrics::IbPortCounters*> selected;
  if (hca_text) {
    std::string rest = *hca_text;
    const bool exclude = !rest.empty() && rest[0] == '^';
    if (exclude) rest.erase(0, 1);
    const bool exact = !rest.empty() && rest[0] == '=';
    if (exact) rest.erase(0, 1);
    std::vector<HcaEntry> entries;
    for (const auto& item : metrics::IfnameSpec::parse(rest).names) {
      HcaEntry e;
      const auto colon = item.find(':');
      e.name = item.substr(0, colon);
      if (colon != std::string::npos) e.port = std::atoi(item.c_str() + colon + 1);
      entries.push_back(e);
    }
    std::vector<std::string> missing;
    for (const auto& e : entries) {
      bool hit = false;
      for (const auto& p : ports) {
        const bool name_ok = exact ? p.hca == e.name : p.hca.rfind(e.name, 0) == 0;
        hit = hit || (name_ok && (e.port == 0 || p.port == e.port));
      }
      if (!hit && !exclude) missing.push_back(e.port ? fmt::format("{}:{}", e.name, e.port) : e.name);
    }
    for (const auto& p : ports) {
      bool hit = false;
      for (const auto& e : entries)
        hit = hit || ((exact ? p.hca == e.name : p.hca.rfind(e.name, 0) == 0) && (e.port == 0 || p.port == e.port));
      if (hit != exclude) selected.push_back(&p);
    }
    std::set<std::string> have;
    for (const auto& p : ports) have.insert(fmt::format("{}:{}", p.hca, p.port));
    if (!missing.empty())
      report.fail("nccl-ib-hca", fmt::format("NCCL_IB_HCA={}: {} not found here (ports: {})", *hca_text,
                                             fmt::join(missing, ", "), fmt::join(have, ", ")),
                  "name adapters that exist (`ls /sys/class/infiniband`) with their port (`mlx5_0:1`)");
  } else {
    for (const auto& p : ports) selected.push_back(&p);
  }
  std::vector<std::string> active, inactive;
  for (const auto* p : selected)
    (p->state.find("ACTIVE") != std::string::npos ? active : inactive)
        .push_back(fmt::format("{}:{} ({}, {})", p->hca, p->port, p->state.empty() ? "state ?" : p->state,
                               p->link_layer.empty() ? "?" : p->link_layer));
  if (!inactive.empty())
    report.fail("ib-ports", fmt::format("port(s) not ACTIVE: {}{}", fmt::join(inactive, ", "),
                                        active.empty() ? "" : fmt::format("; active: {}", fmt::join(active, ", "))),
                "check the cable and the subnet manager (an IB port stays INIT without one: `systemctl status "
                "opensm`), or leave the port out of NCCL_IB_HCA");
  else if (!active.empty())
    report.pass("ib-ports", fmt::format("{} port(s) ACTIVE: {}", active.size(), fmt::join(active, ", ")));
}

void check_p2p(Report& report) {
  const auto p2p = env("NCCL_P2P_DISABLE");
  if (p2p && *p2p == "1")
    report.warn("nccl-p2p", "NCCL_P2P_DISABLE=1: GPUs of this node exchange data through host memory instead of "
                            "NVLink/PCIe peer access (much slower all-reduce within the node)",
                "unset it unless peer access is known broken (some VMs, IOMMU settings); `nvidia-smi topo -m` shows "
                "the links");
  const auto shm = env("NCCL_SHM_DISABLE");
  if (shm && *shm == "1")
    report.warn("nccl-shm", "NCCL_SHM_DISABLE=1: without P2P, local GPUs then talk over sockets",
                "unset it; give the container a large /dev/shm instead");
}

}  // namespace

void check_nccl_network(const DoctorContext& ctx, Report& report) {
  check_socket_ifname(ctx, report);
  check_ib(ctx, report);
  check_p2p(report);
}

}  // namespace lf::doctor
