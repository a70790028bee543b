// Who may join: the token and the job id first (a wrong one learns nothing), then whether
// the joiner agrees with the job's members (nnodes, version, nproc, config) and fits
// (node rank, room). While the job's first round forms, a disagreement is a mistake of the
// job's own nodes and fails every node (both sides named); once it formed, the joiner is
// a stranger: refused on its own, the job named, and the job runs on.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "lf/common/error.h"
#include "lf/rendezvous/config_diff.h"
#include "server_impl.h"

namespace lf::rdzv {

namespace {

// Compares without an early exit, so timing reveals nothing about the token.
bool tokens_equal(const std::string& a, const std::string& b) {
  unsigned diff = a.size() != b.size();
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i)
    diff |= static_cast<unsigned char>(i < a.size() ? a[i] : 0) ^ static_cast<unsigned char>(i < b.size() ? b[i] : 0);
  return diff == 0;
}

}  // namespace

void RendezvousServer::Impl::on_store_hello(const std::shared_ptr<Peer>& peer, const StoreHelloMsg& h) {
  if (!tokens_equal(h.token, opt.token)) return refuse(peer, "store connection refused: authentication failed");
  if (h.job_id != opt.job_id)
    return refuse(peer, fmt::format("store connection for job '{}', this server runs job '{}'", h.job_id, opt.job_id));
  peer->role = Role::kStore;
}

void RendezvousServer::Impl::on_join(const std::shared_ptr<Peer>& peer, JoinMsg&& j) {
  // Say nothing about the expected token or job: a wrong token learns nothing.
  if (!tokens_equal(j.token, opt.token))
    return refuse(peer, "join refused: authentication failed (LF_JOB_TOKEN / LF_JOB_TOKEN_FILE must give the same "
                        "token on every node of a job)");
  if (j.job_id != opt.job_id)
    return refuse(peer, fmt::format("join refused: {} asks for job '{}' (--rdzv-id / RDZV_ID), this server runs "
                                    "job '{}'", describe(j), j.job_id, opt.job_id));
  peer->join = std::move(j);
  peer->role = Role::kAgent;
  const JoinMsg& jm = peer->join;
  if (phase == Phase::kFinished) return refuse(peer, "the job is over");
  // The holder may be dying right now (killed, its EOF not yet read, or silent and about to
  // miss its heartbeats): the claimant may retry until the heartbeat timeout settles it.
  if (auto held = rank_taken(jm))
    return refuse_stranger(peer, *held, static_cast<int64_t>(opt.heartbeat_interval_s * 1000));
  event("join", jm.node_rank, fmt::format("{} from {}", describe(jm), peer->conn->peer()));
  auto problem = check_agreement(jm);
  if (!problem) problem = check_room(jm);
  if (problem) return formed() ? refuse_stranger(peer, *problem) : fail_all(*problem);
  joiners.push_back(peer->id);
  if (phase == Phase::kJoining) return maybe_close_round();
  // Running or stopping: a node that fits (elastic MIN:MAX with room, a lost node's
  // replacement) is parked and joins the next round, at a restart.
  spdlog::info("rendezvous: {} arrived while the job runs with {} node(s) (--nnodes {}): it joins at the next "
               "restart", describe(jm), nodes.size(), nnodes_text(opt.min_nodes, opt.max_nodes));
}

// A formed job's live rank is never taken over. Elastic: ranks are renumbered densely each
// round, so a returning node's NODE_RANK is an order, not a claim (its old number may be
// another node's now): with room left it waits.
std::optional<std::string> RendezvousServer::Impl::rank_taken(const JoinMsg& j) {
  if (j.node_rank < 0 || !formed()) return std::nullopt;
  std::optional<uint64_t> holder_id;
  if (nodes.count(j.node_rank)) holder_id = nodes.at(j.node_rank);
  for (uint64_t id : joiners)
    if (peers.at(id)->join.node_rank == j.node_rank) holder_id = id;
  if (!holder_id || (elastic() && joined_count() < opt.max_nodes)) return std::nullopt;
  const auto& holder = peers.at(*holder_id);
  return fmt::format("node rank {} is held by a live agent (host {}, pid {}, {}); stop it first or use another "
                     "NODE_RANK", j.node_rank, holder->join.hostname, holder->join.pid, holder->conn->peer());
}

// nnodes, version, nproc and the config hash must agree with the job's members. Members
// agree with each other already, so one reference member is enough: O(1) per join.
std::optional<std::string> RendezvousServer::Impl::check_agreement(const JoinMsg& a) {
  if (a.min_nodes != opt.min_nodes || a.max_nodes != opt.max_nodes)
    return fmt::format("nnodes mismatch: {} was started with --nnodes {}, the rendezvous server (node 0) with {}",
                       describe(a), nnodes_text(a.min_nodes, a.max_nodes), nnodes_text(opt.min_nodes, opt.max_nodes));
  std::optional<uint64_t> reference;
  if (!nodes.empty()) reference = nodes.begin()->second;
  else if (!joiners.empty()) reference = joiners.front();
  if (!reference) return std::nullopt;
  const JoinMsg& b = peers.at(*reference)->join;
  if (a.version != b.version)
    return fmt::format("lf-train version mismatch: {} runs {}, {} runs {}", describe(b), b.version, describe(a), a.version);
  if (a.nproc != b.nproc)
    return fmt::format("nproc mismatch: {} has --nproc-per-node {}, {} has {}", describe(b), b.nproc, describe(a), a.nproc);
  if (a.config_hash != b.config_hash) {
    auto diff = describe_config_difference(b.config_items, describe(b), a.config_items, describe(a));
    if (diff.empty())
      diff = fmt::format("{} runs hash {}, {} runs hash {}", describe(b), b.config_hash, describe(a), a.config_hash);
    return fmt::format("command/config mismatch: {}. Every node must run the same command and config", diff);
  }
  return std::nullopt;
}

// Node ranks unique and in range; no more nodes than --nnodes.
std::optional<std::string> RendezvousServer::Impl::check_room(const JoinMsg& a) {
  if (a.node_rank >= 0 && !formed()) {
    for (uint64_t id : joiners) {
      const JoinMsg& b = peers.at(id)->join;
      if (b.node_rank == a.node_rank)
        return fmt::format("duplicate node rank {}: claimed by {} and by {}", a.node_rank, describe(b), describe(a));
    }
  }
  if (a.node_rank >= opt.max_nodes)
    return fmt::format("node rank {} of {} is out of range for --nnodes {}", a.node_rank, describe(a), opt.max_nodes);
  if (joined_count() + 1 <= opt.max_nodes) return std::nullopt;
  std::vector<uint64_t> members = joiners;
  for (auto& [rank, id] : nodes) members.push_back(id);
  if (formed())
    return fmt::format("the job is full: --nnodes {} and its nodes are {}; {} would be one more",
                       nnodes_text(opt.min_nodes, opt.max_nodes), fmt::join(member_names(members), ", "), describe(a));
  return fmt::format("more nodes than --nnodes {}: {} arrived after {}", opt.max_nodes, describe(a),
                     fmt::join(member_names(members), ", "));
}

void RendezvousServer::Impl::refuse_stranger(const std::shared_ptr<Peer>& peer, const std::string& problem,
                                             int64_t retry_after_ms) {
  event("stranger_refused", -1, fmt::format("{} ({}): {}", describe(peer->join), peer->conn->peer(), problem));
  refuse(peer, fmt::format("join refused by {}: {}. This node is not one of that job's nodes and was not let in; the "
                           "job runs on without it (a node of another job? give that job another MASTER_PORT)",
                           job_identity(), problem),
         retry_after_ms);
}

// What a refused stranger is told about the job it reached (it passed the token check).
std::string RendezvousServer::Impl::job_identity() const {
  std::string node0 = "none";
  if (auto it = nodes.find(0); it != nodes.end()) node0 = "host " + peers.at(it->second)->join.hostname;
  const std::string addr = opt.advertised_addr.empty() ? opt.bind_host : opt.advertised_addr;
  return fmt::format("job '{}' at {}:{} (--nnodes {}, running since {} with {} node(s), node 0 on {}, generation {})",
                     opt.job_id, addr, acceptor.local_endpoint().port(), nnodes_text(opt.min_nodes, opt.max_nodes),
                     formed_at, nodes.size(), node0, generation);
}

bool RendezvousServer::Impl::is_member(uint64_t id) const {
  for (const auto& [rank, member] : nodes)
    if (member == id) return true;
  return false;
}

}  // namespace lf::rdzv
