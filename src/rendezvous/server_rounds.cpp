// Forming a round: waiting for nodes (and saying for whom), node ranks, the layout each
// node gets. The first round that closes forms the job (its members are known from then on).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <ctime>
#include <set>

#include "lf/common/error.h"
#include "lf/rendezvous/elastic_ranks.h"
#include "lf/rendezvous/layout.h"
#include "server_impl.h"

namespace lf::rdzv {

std::vector<std::string> RendezvousServer::Impl::member_names(const std::vector<uint64_t>& ids) {
  std::vector<std::string> out;
  for (uint64_t id : ids) out.push_back(describe(peers.at(id)->join));
  return out;
}

void RendezvousServer::Impl::maybe_close_round() {
  int64_t n = joined_count();
  if (n >= opt.max_nodes) return close_round();
  if (n >= opt.min_nodes) {
    last_call_timer.expires_after(seconds_to_ms(opt.last_call_s));
    last_call_timer.async_wait([self = shared_from_this(), gen = generation](boost::system::error_code ec) {
      if (!ec && self->phase == Phase::kJoining && self->generation == gen &&
          self->joined_count() >= self->opt.min_nodes)
        self->close_round();
    });
  }
}

void RendezvousServer::Impl::arm_join_timer() {
  join_deadline = ServerClock::now() + seconds_to_ms(opt.join_timeout_s);
  join_timer.expires_at(join_deadline);
  join_timer.async_wait([self = shared_from_this(), gen = generation](boost::system::error_code ec) {
    if (ec || self->phase != Phase::kJoining || self->generation != gen) return;
    if (self->joined_count() >= self->opt.min_nodes) return self->close_round();
    std::vector<uint64_t> members = self->joiners;
    for (auto& [r, id] : self->nodes) members.push_back(id);
    self->fail_all(fmt::format(
        "rendezvous timed out after {}s: {} of {} nodes joined ({}). Check that every node runs lf-train with the "
        "same MASTER_ADDR, MASTER_PORT, --rdzv-id and --nnodes, and that this port is reachable from them",
        self->opt.join_timeout_s, self->joined_count(), self->opt.min_nodes,
        members.empty() ? std::string("none") : fmt::format("{}", fmt::join(self->member_names(members), ", "))));
  });
}

// Fixed size: requested ranks are claims (layout.h). Elastic: dense ranks in the old order
// (elastic_ranks.h), so a round after a lost node runs on the nodes left.
std::optional<std::vector<std::pair<uint64_t, int64_t>>> RendezvousServer::Impl::assign_ranks(std::string* error) {
  std::vector<NodeRequest> requests;
  std::vector<bool> stays;
  for (auto& [rank, id] : nodes) {
    requests.push_back({id, rank, peers.at(id)->join.nproc});
    stays.push_back(true);
  }
  for (uint64_t id : joiners) {
    requests.push_back({id, peers.at(id)->join.node_rank, peers.at(id)->join.nproc});
    stays.push_back(false);
  }
  if (!elastic()) return assign_node_ranks(requests, error);
  auto dense = assign_dense_node_ranks(requests, stays);
  for (size_t i = 0; i < dense.size(); ++i) {
    const int64_t before = requests[i].requested_rank;
    if (before < 0 || before == dense[i].second) continue;
    const std::string who = stays[i] ? fmt::format("node {}", before)
                                     : fmt::format("the node that asked for rank {} (NODE_RANK)", before);
    const std::string what = fmt::format("{} is node {} from generation {} (--nnodes {}: ranks are dense)", who,
                                         dense[i].second, generation, nnodes_text(opt.min_nodes, opt.max_nodes));
    event("renumbered", dense[i].second, what);
    spdlog::info("rendezvous: {} ({})", what, peers.at(dense[i].first)->join.hostname);
  }
  return dense;
}

void RendezvousServer::Impl::close_round() {
  std::string error;
  auto assigned = assign_ranks(&error);
  if (!assigned) return fail_all(error);
  nodes.clear();
  joiners.clear();
  for (auto& [id, rank] : *assigned) {
    nodes[rank] = id;
    peers.at(id)->node_rank = rank;
  }
  join_timer.cancel();
  last_call_timer.cancel();
  phase = Phase::kRunning;
  // Workers' own store (MASTER_ADDR/MASTER_PORT): node 0's host, as node 0 connected to us.
  auto& node0 = peers.at(nodes.at(0));
  std::string worker_addr = node0->conn->peer_ip();
  if (worker_addr.rfind("127.", 0) == 0 || worker_addr == "::1") worker_addr.clear();
  int64_t rank_base = 0;
  int64_t world = 0;
  for (auto& [rank, id] : nodes) world += peers.at(id)->join.nproc;
  if (base_world == 0) {
    base_world = world;
    // The job is formed: from now on a joiner that is not one of these nodes is a stranger.
    const std::time_t now = std::time(nullptr);
    char buf[32];
    std::tm utc{};
    ::gmtime_r(&now, &utc);
    std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &utc);
    formed_at = buf;
  }
  round_world = world;
  event("layout", -1, fmt::format("{} nodes, world size {}", nodes.size(), world));
  record_round();
  if (world != base_world)
    spdlog::info("rendezvous: generation {} runs on {} node(s), world size {} (the job's first round had {}; "
                 "lf-worker keeps its global batch)", generation, nodes.size(), world, base_world);
  for (auto& [rank, id] : nodes) {
    auto& p = peers.at(id);
    p->stopped = p->done = false;
    LayoutMsg l;
    l.node_rank = rank;
    l.nnodes = static_cast<int64_t>(nodes.size());
    l.rank_base = rank_base;
    l.world_size = world;
    l.nproc = p->join.nproc;
    l.generation = generation;
    l.max_restarts = opt.max_restarts;
    l.worker_master_addr = worker_addr;
    l.worker_master_port = node0->join.worker_store_port;
    l.base_world_size = elastic() ? base_world : 0;
    l.status_interval_ms = static_cast<int64_t>(opt.node_status_interval_s * 1000);
    p->conn->send(l);
    rank_base += p->join.nproc;
  }
}

// ---- waiting: who waits for whom ------------------------------------------------

void RendezvousServer::Impl::arm_status_timer() {
  if (opt.status_interval_s <= 0) return;
  status_timer.expires_after(seconds_to_ms(opt.status_interval_s));
  status_timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (ec || self->phase == Phase::kFinished) return;
    if (self->phase == Phase::kJoining) self->report_waiting();
    self->arm_status_timer();
  });
}

// Node 0's log and every joined agent get the same line: which nodes are in, which are
// missing, how long the round still waits, and what to check on the missing ones.
void RendezvousServer::Impl::report_waiting() {
  const int64_t need = opt.min_nodes - joined_count();
  if (need <= 0) return;  // elastic: the last call runs
  std::vector<std::string> in;
  std::set<int64_t> ranks;
  bool rankless = false;
  for (auto& [rank, id] : nodes) {
    in.push_back(fmt::format("node {} on host {}", rank, peers.at(id)->join.hostname));
    ranks.insert(rank);
  }
  for (uint64_t id : joiners) {
    const JoinMsg& j = peers.at(id)->join;
    in.push_back(j.node_rank >= 0 ? fmt::format("node {} on host {}", j.node_rank, j.hostname)
                                  : fmt::format("host {} (rank by arrival)", j.hostname));
    if (j.node_rank >= 0) ranks.insert(j.node_rank);
    rankless |= j.node_rank < 0;
  }
  std::vector<int64_t> missing;
  for (int64_t r = 0; r < opt.min_nodes && !rankless; ++r)
    if (!ranks.count(r)) missing.push_back(r);
  const std::string whom = !rankless && static_cast<int64_t>(missing.size()) == need
                               ? fmt::format("node{} {}", need > 1 ? "s" : "", fmt::join(missing, ", "))
                               : fmt::format("{} more node(s)", need);
  const auto left = std::chrono::duration_cast<std::chrono::seconds>(join_deadline - ServerClock::now()).count();
  const std::string addr = opt.advertised_addr.empty() ? std::string("node 0's address") : opt.advertised_addr;
  const uint16_t port = acceptor.local_endpoint().port();
  const bool loopback = addr.rfind("127.", 0) == 0 || addr == "localhost" || addr == "::1";
  std::string text = fmt::format(
      "rendezvous: {} of {} nodes joined ({}); waiting for {}, {} s left; check that {} lf-train with "
      "MASTER_ADDR={} MASTER_PORT={} (and the same --nnodes{}) and can reach TCP port {} of this host{}",
      joined_count(), opt.min_nodes, in.empty() ? std::string("none yet") : fmt::format("{}", fmt::join(in, ", ")),
      whom, std::max<int64_t>(0, left), need > 1 ? "they run" : "it runs", addr, port,
      opt.job_id != "none" ? ", --rdzv-id " + opt.job_id : std::string(), port,
      loopback ? fmt::format(" (MASTER_ADDR={} is a loopback address: nodes on other hosts cannot reach it)", addr)
               : std::string());
  spdlog::info("{}", text);
  for (uint64_t id : joiners) peers.at(id)->conn->send(WaitingMsg{text});
  for (auto& [rank, id] : nodes) peers.at(id)->conn->send(WaitingMsg{text});
}

}  // namespace lf::rdzv
