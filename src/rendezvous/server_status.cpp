// The nodes' statuses (NodeStatusMsg, protocol 4) and the job's record: what node 0's live
// page shows (lf/rendezvous/job_record.h). Only members' statuses count; a stranger's is never
// read (it was refused at its Join).
#include <fmt/format.h>

#include "lf/common/error.h"
#include "lf/common/wall_clock.h"
#include "server_impl.h"

namespace lf::rdzv {

namespace {

const char* phase_name(RendezvousServer::Impl::Phase p) {
  using P = RendezvousServer::Impl::Phase;
  switch (p) {
    case P::kJoining: return "joining";
    case P::kRunning: return "running";
    case P::kStopping: return "stopping";
    case P::kFinished: return "finished";
  }
  return "?";
}

}  // namespace

void RendezvousServer::Impl::on_node_status(const std::shared_ptr<Peer>& peer, NodeStatusMsg&& s) {
  // A node parked for the next round has no place in this one's table yet; a stale generation's
  // status (sent before the abort reached the node) describes workers that are gone.
  if (!is_member(peer->id) || s.generation != generation) return;
  record.status(peer->node_rank, std::move(s), ServerClock::now());
}

void RendezvousServer::Impl::record_round() {
  std::vector<NodeRecord> round;
  for (auto& [rank, id] : nodes) {
    const auto& p = peers.at(id);
    NodeRecord n;
    n.node_rank = rank;
    n.hostname = p->join.hostname;
    n.address = p->conn->peer_ip();
    n.pid = p->join.pid;
    n.nproc = p->join.nproc;
    round.push_back(std::move(n));
  }
  record.round_formed(std::move(round));
}

void RendezvousServer::Impl::record_failure(const std::shared_ptr<Peer>& peer, const FailureMsg& f) {
  FailureRecord r;
  r.wall_time = wall_now();
  r.generation = f.generation;
  r.node_rank = peer->node_rank;
  r.global_rank = f.global_rank;
  r.exit_code = f.exit_code;
  r.signal = f.signal;
  r.restartable = f.restartable;
  r.message = f.message;
  record.failure(std::move(r));
}

JobView RendezvousServer::Impl::view() const {
  JobView v;
  v.job_id = opt.job_id;
  v.phase = phase_name(phase);
  v.formed_at = formed_at;
  v.generation = generation;
  v.restarts = restarts_done;
  v.max_restarts = opt.max_restarts;
  v.min_nodes = opt.min_nodes;
  v.max_nodes = opt.max_nodes;
  for (const auto& [rank, id] : nodes) v.world_size += peers.at(id)->join.nproc;
  if (v.world_size == 0) v.world_size = round_world;  // the nodes left: the world the job last ran with
  v.exit_code = finished_code;
  v.end_reason = finished_reason;
  v.heartbeat_timeout_s = opt.heartbeat_timeout_s;
  const auto now = ServerClock::now();
  for (const auto& [rank, id] : nodes) {
    const auto& p = peers.at(id);
    if (p->conn->is_open()) v.silent_s[rank] = std::chrono::duration<double>(now - p->last_seen).count();
  }
  for (uint64_t id : joiners) v.waiting.push_back(describe(peers.at(id)->join));
  v.record = &record;
  return v;
}

}  // namespace lf::rdzv
