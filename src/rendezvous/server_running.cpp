// A formed round: members' failures (a restart or the end of the job), the stop barrier,
// completion, lost connections and heartbeats both ways. Only members stop the job.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lf/common/error.h"
#include "server_impl.h"

namespace lf::rdzv {

// ---- running: failures, stops, completion --------------------------------------

void RendezvousServer::Impl::on_failure_report(const std::shared_ptr<Peer>& peer, const FailureMsg& f) {
  // A node parked for the next round is no member yet: its failure (Ctrl-C, say) is its own.
  if (formed() && !is_member(peer->id)) {
    event("joiner_left", -1, fmt::format("{}: {}", describe(peer->join), f.message));
    spdlog::info("rendezvous: {}, waiting for a next round, left: {}", describe(peer->join), f.message);
    peer->conn->close_after_flush();
    return forget(peer->id);
  }
  // A failure that must end the job (Ctrl-C, a config error) sent while a round waits for
  // its nodes (at the start, or for a replacement) ends it at once: waiting on would end
  // only at the join timeout.
  if (!f.restartable && phase == Phase::kJoining)
    return fail_all(fmt::format("{}: {}, while the job waited for nodes to join", describe(peer->join), f.message));
  if (f.generation != generation) return;  // stale: already handled
  record_failure(peer, f);
  std::string what = f.global_rank >= 0
                         ? fmt::format("worker rank {} on node {} ({}) failed: {}", f.global_rank,
                                       peer->node_rank, peer->join.hostname, f.message)
                         : fmt::format("node {} ({}): {}", peer->node_rank, peer->join.hostname, f.message);
  node_failed(peer->node_rank, what, f.restartable, f.exit_as);
}

void RendezvousServer::Impl::node_failed(int64_t node, const std::string& reason, bool restartable, int64_t exit_as) {
  if (phase == Phase::kJoining || phase == Phase::kFinished) return;
  if (phase == Phase::kStopping) {
    if (!restartable && restart_pending) {
      // A failure no restart can fix (a config/data error, Ctrl-C) after a restartable one:
      // the agents, told to restart, hear that the job ends instead.
      restart_pending = false;
      spdlog::error("job failure (generation {}): {} -> not restarting after all: stopping every node", generation,
                    reason);
      AbortMsg abort{generation, false, node, reason, exit_as};
      for (auto& [rank, id] : nodes) peers.at(id)->conn->send(abort);
    }
    return check_all_stopped();
  }
  bool restart = restartable && restarts_done < opt.max_restarts;
  event("failure_detected", node, reason);
  spdlog::error("job failure (generation {}): {} -> {}", generation, reason,
                restart ? fmt::format("restarting ({} of {})", restarts_done + 1, opt.max_restarts)
                        : std::string("stopping every node"));
  phase = Phase::kStopping;
  restart_pending = restart;
  AbortMsg abort{generation, restart, node, reason, restart ? 0 : exit_as};
  for (auto& [rank, id] : nodes) peers.at(id)->conn->send(abort);
  stop_timer.expires_after(seconds_to_ms(opt.stop_timeout_s));
  stop_timer.async_wait([self = shared_from_this(), gen = generation](boost::system::error_code ec) {
    if (ec || self->phase != Phase::kStopping || self->generation != gen) return;
    self->event("stop_timeout", -1, "agents did not report their workers stopped in time");
    self->restart_pending = false;
    self->end_stopping();
  });
  check_all_stopped();
}

void RendezvousServer::Impl::on_stopped(const std::shared_ptr<Peer>& peer, const StoppedMsg& s) {
  if (s.generation != generation || phase != Phase::kStopping) return;
  peer->stopped = true;
  if (s.worker_store_port) peer->join.worker_store_port = s.worker_store_port;
  event("node_stopped", peer->node_rank, peer->join.hostname);
  check_all_stopped();
}

void RendezvousServer::Impl::check_all_stopped() {
  if (phase != Phase::kStopping) return;
  for (auto& [rank, id] : nodes)
    if (!peers.at(id)->stopped) return;
  end_stopping();
}

void RendezvousServer::Impl::end_stopping() {
  stop_timer.cancel();
  event("all_stopped", -1, restart_pending ? "restarting" : "job stopped");
  if (!restart_pending) {
    for (auto& [rank, id] : nodes) peers.at(id)->conn->close_after_flush();
    return finish(kExitAborted, "a node failed and no restart is left");
  }
  ++generation;
  ++restarts_done;
  phase = Phase::kJoining;
  // Parked joiners (replacements that arrived while stopping) count for the new round.
  arm_join_timer();
  maybe_close_round();
}

void RendezvousServer::Impl::on_done(const std::shared_ptr<Peer>& peer, const DoneMsg& d) {
  if (d.generation != generation || phase != Phase::kRunning) return;
  peer->done = true;
  event("node_done", peer->node_rank, peer->join.hostname);
  record.node_done(peer->node_rank);
  for (auto& [rank, id] : nodes)
    if (!peers.at(id)->done) return;
  for (auto& [rank, id] : nodes) {
    peers.at(id)->conn->send(FinishedMsg{});
    peers.at(id)->conn->close_after_flush();
  }
  finish(kExitOk, "every node finished");
}

void RendezvousServer::Impl::on_close(uint64_t id, const std::string& why) {
  auto it = peers.find(id);
  if (it == peers.end()) return;
  auto peer = it->second;
  int64_t rank = peer->node_rank;
  bool was_node = rank >= 0 && nodes.count(rank) && nodes.at(rank) == id;
  forget(id);
  if (!was_node || phase == Phase::kFinished) return;
  std::string reason = fmt::format("lost the agent of node {} ({}, {}): {}", rank, peer->join.hostname,
                                   peer->conn->peer(), why.empty() ? "closed" : why);
  record.node_lost(rank, why.empty() ? "closed" : why);
  if (phase == Phase::kStopping) {
    event("node_lost", rank, reason);
    return check_all_stopped();
  }
  node_failed(rank, reason, true);
}

// Heartbeats both ways: we ping every agent, and drop agents we have not heard from.
void RendezvousServer::Impl::heartbeat_tick() {
  auto now = ServerClock::now();
  auto timeout = seconds_to_ms(opt.heartbeat_timeout_s);
  std::vector<std::shared_ptr<Peer>> silent;
  close_mute(seconds_to_ms(opt.hello_timeout_s));
  for (auto& [id, p] : peers) {
    if (p->role != Role::kAgent) continue;
    if (now - p->last_seen > timeout) silent.push_back(p);
    else p->conn->send(HeartbeatMsg{generation});
  }
  for (auto& p : silent) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - p->last_seen).count();
    event("heartbeat_missed", p->node_rank, fmt::format("{} silent for {} ms", p->conn->peer(), ms));
    // on_close turns it into a node failure, with this reason: a stopped (SIGSTOP) or hung
    // agent keeps its socket open, so it is its silence that says it is gone.
    p->conn->close(fmt::format("missed heartbeats: no message for {:.1f} s (--heartbeat-timeout {} s): the agent is "
                               "stopped, hung, or cut off from this host", ms / 1000.0, opt.heartbeat_timeout_s));
  }
  if (phase == Phase::kFinished && peers.empty()) return;
  heartbeat_timer.expires_after(seconds_to_ms(std::min(opt.heartbeat_interval_s, opt.heartbeat_timeout_s / 4)));
  heartbeat_timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (!ec) self->heartbeat_tick();
  });
}

// Refuses connections that have said neither Join nor StoreHello for `older_than` (an agent
// says Join as soon as it connects): a silent socket, or one that sends a frame a byte at a
// time (slow-loris), holds a descriptor and nothing else.
void RendezvousServer::Impl::close_mute(std::chrono::milliseconds older_than) {
  const auto now = ServerClock::now();
  std::vector<std::shared_ptr<Peer>> mute;
  for (auto& [id, p] : peers)
    if (p->role == Role::kNew && now - p->connected > older_than) mute.push_back(p);
  for (auto& p : mute) {
    event("closed_mute", -1, fmt::format("{}: no Join or StoreHello in {} ms", p->conn->peer(), older_than.count()));
    refuse(p, fmt::format("no complete Join or StoreHello within {:.1f} s of connecting: closed (an lf-train agent "
                          "sends its Join at once)", older_than.count() / 1000.0));
  }
}

}  // namespace lf::rdzv
