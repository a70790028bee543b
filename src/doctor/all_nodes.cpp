// `lf-train doctor --all-nodes`: the doctors of every node meet as the job's agents would,
// through a rendezvous server on MASTER_ADDR:MASTER_PORT hosted by node 0's doctor (its
// key-value store), and compare what one node cannot check alone:
//   - every node reaches MASTER_PORT (it joined) and every pair of nodes connects over TCP
//     (each listens on a port, --probe-port or any, and every other node connects to it:
//     NCCL's sockets need the same), with the clock skew measured on the way;
//   - driver / CUDA / NCCL versions and GPU models equal everywhere;
//   - NPROC_PER_NODE equal (the rendezvous refuses a mismatch);
//   - output_dir is one filesystem: a file node 0 writes there is seen by every node.
// Every node prints the same cross-node lines. Every wait is bounded by --timeout.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "lf/common/error.h"
#include "lf/common/version.h"
#include "lf/common/wall_clock.h"
#include "lf/doctor/doctor.h"
#include "lf/doctor/net_probe.h"
#include "lf/rendezvous/bind_address.h"
#include "lf/rendezvous/server.h"
#include "lf/rendezvous/store_client.h"

namespace lf::doctor {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::chrono::milliseconds ms(double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); }

// Node 0's doctor hosts the rendezvous server (its store) on a thread of its own.
class HostedServer {
 public:
  HostedServer(const DoctorContext& ctx) {
    rdzv::ServerOptions so;
    // Where the job's server would listen; a MASTER_ADDR that is not this host's is
    // check_master's finding, so the doctors still meet on every address.
    try {
      so.bind_host = rdzv::choose_bind_address(ctx.master_addr, ctx.nnodes, false).address;
    } catch (const ConfigError&) {
      so.bind_host = "0.0.0.0";
    }
    so.port = ctx.master_port;
    so.job_id = ctx.rdzv_id;
    so.token = ctx.token;
    so.version = kVersion;
    so.min_nodes = so.max_nodes = ctx.nnodes;
    so.join_timeout_s = 1e6;     // no agent joins: only store connections
    so.status_interval_s = 1e6;  // so no "waiting for nodes" lines either
    server_ = std::make_unique<rdzv::RendezvousServer>(io_, so);
    server_->start([](int, const std::string&) {});
    thread_ = std::thread([this] { io_.run(); });
  }
  ~HostedServer() {
    boost::asio::post(io_, [this] { server_->shutdown(1.0, [this] { io_.stop(); }); });
    thread_.join();
  }

 private:
  boost::asio::io_context io_;
  std::unique_ptr<rdzv::RendezvousServer> server_;
  std::thread thread_;
};

// Answers every connection with this host's wall clock ("<seconds>\n") and closes it.
class ProbeListener {
 public:
  explicit ProbeListener(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    LF_CHECK(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && ::listen(fd_, 64) == 0, NetworkError,
             "doctor: cannot listen on probe port {}: {} (choose another --probe-port)", port, std::strerror(errno));
    socklen_t len = sizeof(a);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { loop(); });
  }
  ~ProbeListener() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  uint16_t port() const { return port_; }

 private:
  void loop() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      const std::string now = fmt::format("{:.6f}\n", wall_now());
      ssize_t ignored = ::send(c, now.data(), now.size(), MSG_NOSIGNAL);
      (void)ignored;
      ::close(c);
    }
  }

  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

struct Probe {
  bool ok = false;
  std::string error;
  double skew_s = 0, rtt_s = 0;
};

// Connects to a node's probe listener (non-blocking connect: a dropped SYN costs
// timeout_s, not the kernel's two minutes) and reads its clock.
Probe probe(const std::string& addr, uint16_t port, double timeout_s) {
  Probe p;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (::inet_pton(AF_INET, addr.c_str(), &a.sin_addr) != 1) {
    p.error = fmt::format("'{}' is not an IPv4 address", addr);
    return p;
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  const int wait_ms = static_cast<int>(timeout_s * 1000);
  const double t1 = wall_now();
  int err = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 ? 0 : errno;
  if (err == EINPROGRESS) {
    pollfd w{fd, POLLOUT, 0};
    if (::poll(&w, 1, wait_ms) <= 0) {
      err = ETIMEDOUT;
    } else {
      socklen_t len = sizeof(err);
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    }
  }
  if (err != 0) {
    p.error = err == ETIMEDOUT ? fmt::format("no answer within {:.0f} s (packets dropped: a firewall?)", timeout_s)
                               : std::strerror(err);
    ::close(fd);
    return p;
  }
  p.ok = true;
  pollfd r{fd, POLLIN, 0};
  char buf[64] = {};
  if (::poll(&r, 1, wait_ms) > 0 && ::recv(fd, buf, sizeof(buf) - 1, 0) > 0) {
    const double t2 = wall_now();
    p.rtt_s = t2 - t1;
    p.skew_s = std::atof(buf) - (t1 + t2) / 2;
  } else {
    p.error = "connected, but the clock was not read";
  }
  ::close(fd);
  return p;
}

std::string nonce() {
  std::random_device rd;
  return fmt::format("{:016x}", (static_cast<uint64_t>(rd()) << 32) ^ rd());
}

std::string key(const char* what, int64_t rank) { return fmt::format("doctor/{}/{}", what, rank); }

void compare_versions(const std::vector<json>& facts, Report& report) {
  std::map<std::string, std::map<std::string, std::vector<int64_t>>> seen;  // field -> value -> nodes
  for (const auto& f : facts)
    for (const char* field : {"driver_version", "cuda_version", "nccl_version", "nproc", "gpu_models"})
      seen[field][f.at(field).dump()].push_back(f.at("node").get<int64_t>());
  auto describe = [](const std::map<std::string, std::vector<int64_t>>& v) {
    std::vector<std::string> parts;
    for (const auto& [value, nodes] : v) parts.push_back(fmt::format("{} on node(s) {}", value, fmt::join(nodes, ",")));
    return fmt::format("{}", fmt::join(parts, "; "));
  };
  const bool gpus = std::any_of(facts.begin(), facts.end(), [](const json& f) { return f.at("gpu_count") > 0; });
  if (gpus) {
    for (const char* field : {"nccl_version", "cuda_version"})
      if (seen[field].size() > 1)
        report.fail("nodes-" + std::string(field).substr(0, 4),
                    fmt::format("{} differs between nodes: {}", field, describe(seen[field])),
                    "install the same CUDA driver / NCCL (the same container image) on every node: NCCL fails or "
                    "hangs between different versions");
    if (seen["driver_version"].size() > 1)
      report.warn("nodes-driver", fmt::format("driver differs between nodes: {}", describe(seen["driver_version"])),
                  "use the same NVIDIA driver everywhere");
    if (seen["gpu_models"].size() > 1)
      report.warn("nodes-gpus", fmt::format("GPU models differ: {}", describe(seen["gpu_models"])),
                  "the job runs at the pace of the slowest GPU");
    if (seen["nccl_version"].size() <= 1 && seen["cuda_version"].size() <= 1 && seen["driver_version"].size() <= 1)
      report.pass("nodes-versions", fmt::format("every node: driver {}, CUDA {}, NCCL {}, {}",
                                                seen["driver_version"].begin()->first,
                                                seen["cuda_version"].begin()->first,
                                                seen["nccl_version"].begin()->first,
                                                seen["gpu_models"].begin()->first));
  }
  if (seen["nproc"].size() > 1)
    report.fail("nodes-nproc", fmt::format("NPROC_PER_NODE differs: {}", describe(seen["nproc"])),
                "set the same NPROC_PER_NODE on every node (the rendezvous refuses a mismatch)");
}

void compare_mesh(const std::vector<json>& facts, const std::vector<json>& results, Report& report, double timeout_s) {
  std::vector<std::string> broken;
  double worst_skew = 0;
  int pairs = 0;
  std::string worst_pair;
  for (const auto& r : results)
    for (const auto& p : r.at("probes")) {
      ++pairs;
      const auto to = p.at("to").get<int64_t>();
      const auto& target = facts.at(static_cast<size_t>(to));
      if (!p.at("ok").get<bool>()) {
        broken.push_back(fmt::format("node {} -> node {} ({}:{}): {}", r.at("node").get<int64_t>(), to,
                                     target.at("address").get<std::string>(), target.at("probe_port").get<int>(),
                                     p.at("error").get<std::string>()));
        continue;
      }
      const double skew = std::fabs(p.at("skew_s").get<double>());
      if (p.at("error").get<std::string>().empty() && skew > worst_skew) {
        worst_skew = skew;
        worst_pair = fmt::format("node {} vs node {}", r.at("node").get<int64_t>(), to);
      }
    }
  if (!broken.empty())
    report.fail("nodes-mesh", fmt::format("{} of {} node pairs cannot connect over TCP: {}", broken.size(), pairs,
                                          fmt::join(broken, "; ")),
                "allow TCP between all nodes on all ports (NCCL opens ephemeral ones; --probe-port checks a given "
                "one), and set NCCL_SOCKET_IFNAME to the interface of that network");
  else if (pairs > 0)
    report.pass("nodes-mesh", fmt::format("every pair of the {} nodes connects over TCP ({} probes)", facts.size(),
                                          pairs));
  if (worst_skew > 1.0)
    report.warn("nodes-clock", fmt::format("clocks differ by {:.2f} s ({})", worst_skew, worst_pair),
                "run NTP/chrony on every node: logs, checkpoints and timeouts are compared across nodes");
  else if (pairs > 0)
    report.pass("nodes-clock", fmt::format("clocks agree within {:.0f} ms", worst_skew * 1000));
  (void)timeout_s;
}

void compare_shared(const std::vector<json>& facts, const std::vector<json>& results, Report& report,
                    const std::string& output_dir) {
  std::vector<std::string> blind;
  bool any = false;
  for (const auto& r : results) {
    if (r.at("shared").is_null()) continue;
    any = true;
    if (!r.at("shared").get<bool>())
      blind.push_back(fmt::format("node {} ({})", r.at("node").get<int64_t>(),
                                  facts.at(r.at("node").get<size_t>()).at("hostname").get<std::string>()));
  }
  if (!any) return;
  if (!blind.empty())
    report.fail("output-shared",
                fmt::format("output_dir {} is not one filesystem: {} do(es) not see the file node 0 wrote there "
                            "(a node-local disk?)", output_dir, fmt::join(blind, ", ")),
                "put output_dir on a filesystem every node mounts at the same path (NFS, Lustre, ...): checkpoints "
                "are written by rank 0 and resumed from by every rank");
  else
    report.pass("output-shared", fmt::format("every node sees the file node 0 wrote in {}", output_dir));
}

// A file node 0 writes in output_dir, or in the nearest folder above it that exists (the doctor
// creates no folder), named in the store for the other nodes to look for.
fs::path leave_shared_file(const std::string& output_dir, rdzv::StoreClient& store) {
  std::error_code ec;
  fs::path at = fs::absolute(output_dir, ec);
  while (!at.empty() && !fs::exists(at, ec) && at != at.root_path()) at = at.parent_path();
  const fs::path file = at / fmt::format(".lf-doctor-shared-{}", nonce());
  std::ofstream(file) << "lf-train doctor\n";
  store.set("doctor/shared", file.string());
  return file;
}

// Node 0 hosts the doctors' store on MASTER_PORT; every node connects to it. False (with the
// failure reported) when the port is taken on node 0 or node 0 cannot be reached.
bool connect_doctors(const DoctorContext& ctx, Report& report, bool host, std::unique_ptr<HostedServer>& server,
                     std::unique_ptr<rdzv::StoreClient>& store) {
  if (host) {
    try {
      server = std::make_unique<HostedServer>(ctx);
      report.pass("master-port", fmt::format("MASTER_PORT {} is free on node 0 (the doctors meet on it)",
                                             ctx.master_port));
    } catch (const Error& e) {
      const auto owner = port_owner(ctx.master_port, ctx.proc_root);
      report.fail("master-port",
                  fmt::format("MASTER_PORT {} is in use on node 0{}: {}", ctx.master_port,
                              owner.empty() ? "" : " by " + owner, e.what()),
                  "stop that process (an earlier lf-train / torchrun?) or choose another MASTER_PORT on every node");
      return false;
    }
  }
  try {
    store = std::make_unique<rdzv::StoreClient>(ctx.master_addr, ctx.master_port, ctx.rdzv_id, ctx.token,
                                                ms(ctx.all_nodes_timeout_s));
    store->request_timeout = ms(ctx.all_nodes_timeout_s + 5);
  } catch (const Error& e) {
    report.fail("master-port",
                fmt::format("cannot reach node 0's doctor at {}:{} within {:.0f} s: {}", ctx.master_addr,
                            ctx.master_port, ctx.all_nodes_timeout_s, e.what()),
                "start `lf-train doctor --all-nodes` on node 0 too; open TCP port MASTER_PORT on node 0 to this node");
    return false;
  }
  if (!host) report.pass("master-port", fmt::format("reached node 0's doctor at {}:{}", ctx.master_addr, ctx.master_port));
  return true;
}

json node_facts(int64_t rank, const NodeFacts& facts, const std::string& address, uint16_t probe_port) {
  return {{"node", rank},
          {"hostname", facts.hostname},
          {"address", address},
          {"probe_port", probe_port},
          {"gpu_count", facts.gpu_count},
          {"gpu_models", facts.gpu_models},
          {"driver_version", facts.driver_version},
          {"cuda_version", facts.cuda_version},
          {"nccl_version", facts.nccl_version},
          {"nproc", facts.nproc}};
}

std::vector<std::string> rank_keys(const char* what, int64_t nnodes) {
  std::vector<std::string> keys;
  for (int64_t r = 0; r < nnodes; ++r) keys.push_back(key(what, r));
  return keys;
}

// This node's view of the others: a TCP probe of each node's listener, and whether it sees the
// file node 0 left (leave_shared_file).
json probe_others(const DoctorContext& ctx, rdzv::StoreClient& store, const std::vector<json>& facts_all,
                  int64_t rank, bool host) {
  json result = {{"node", rank}, {"probes", json::array()}, {"shared", nullptr}};
  for (const auto& f : facts_all) {
    if (f.at("node") == rank) continue;
    const Probe p = probe(f.at("address").get<std::string>(), f.at("probe_port").get<uint16_t>(), ctx.connect_timeout_s);
    result["probes"].push_back({{"to", f.at("node")}, {"ok", p.ok}, {"error", p.error}, {"skew_s", p.skew_s},
                                {"rtt_s", p.rtt_s}});
  }
  if (ctx.config) {
    if (host) result["shared"] = true;
    else if (const auto name = store.get("doctor/shared"))
      result["shared"] = fs::exists(fs::path(*name));
  }
  return result;
}

void compare_nodes(const DoctorContext& ctx, Report& report, const std::vector<json>& facts_all,
                   const std::vector<json>& results_all) {
  std::vector<std::string> names;
  for (const auto& f : facts_all)
    names.push_back(fmt::format("{} {} ({})", f.at("node").get<int64_t>(), f.at("hostname").get<std::string>(),
                                f.at("address").get<std::string>()));
  report.pass("nodes", fmt::format("{} node(s) met: {}", facts_all.size(), fmt::join(names, ", ")));
  compare_versions(facts_all, report);
  if (results_all.size() == facts_all.size()) {
    compare_mesh(facts_all, results_all, report, ctx.connect_timeout_s);
    if (ctx.config) compare_shared(facts_all, results_all, report, ctx.config->output.output_dir);
  }
}

}  // namespace

// Phases: meet on node 0's store, publish this node's facts, wait for every node's, probe the
// others and publish what was seen, wait for every node's results, compare.
void run_all_nodes(const DoctorContext& ctx, Report& report, const NodeFacts& facts) {
  const bool host = ctx.node_rank == 0 || (ctx.node_rank < 0 && is_local_address(ctx.master_addr));
  std::unique_ptr<HostedServer> server;
  std::unique_ptr<rdzv::StoreClient> store;
  if (!connect_doctors(ctx, report, host, server, store)) return;
  const int64_t rank = ctx.node_rank >= 0 ? ctx.node_rank : host ? 0 : store->add("doctor/next_rank", 1);
  ProbeListener listener(ctx.probe_port);
  // Node 0 leaves a file in output_dir for the others to find.
  const fs::path shared_file = ctx.config && host ? leave_shared_file(ctx.config->output.output_dir, *store) : fs::path();
  store->set(key("facts", rank), node_facts(rank, facts, store->local_address(), listener.port()).dump());
  const auto fact_keys = rank_keys("facts", ctx.nnodes), result_keys = rank_keys("results", ctx.nnodes);
  try {
    store->wait(fact_keys, ms(ctx.all_nodes_timeout_s));
  } catch (const Error& e) {
    if (!shared_file.empty()) fs::remove(shared_file);
    return report.fail("nodes", fmt::format("not every node's doctor arrived within {:.0f} s: {}",
                                            ctx.all_nodes_timeout_s, e.what()),
                       "run `lf-train doctor --all-nodes` on every node with the same NNODES, MASTER_ADDR, "
                       "MASTER_PORT (and NODE_RANK 0..NNODES-1)");
  }
  std::vector<json> facts_all, results_all;
  for (const auto& k : fact_keys) facts_all.push_back(json::parse(*store->get(k)));
  store->set(key("results", rank), probe_others(ctx, *store, facts_all, rank, host).dump());
  try {
    store->wait(result_keys, ms(ctx.all_nodes_timeout_s));
    for (const auto& k : result_keys) results_all.push_back(json::parse(*store->get(k)));
  } catch (const Error& e) {
    report.fail("nodes", fmt::format("a node's doctor stopped before sharing its results: {}", e.what()),
                "look at that node's doctor output");
  }
  compare_nodes(ctx, report, facts_all, results_all);
  // Node 0 keeps the store up until everyone read the results.
  try {
    store->barrier("doctor/done", ctx.nnodes, ms(ctx.all_nodes_timeout_s));
  } catch (const Error&) {
  }
  if (!shared_file.empty()) fs::remove(shared_file);
}

}  // namespace lf::doctor
