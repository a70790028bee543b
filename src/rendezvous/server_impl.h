#pragma once
// The rendezvous server's state and its handlers, one file per part of a job's life:
//   server.cpp            binding, accepting, the message dispatch, refusals, the end
//   server_admission.cpp  who may join: token, job id, agreement with the members, strangers
//   server_rounds.cpp     forming a round: waiting for nodes, node ranks, the layout
//   server_running.cpp    a formed round: failures, stops, completion, heartbeats
//   server_status.cpp     the nodes' statuses and the job's record (the live page's source)
// Membership: once the job's first round formed (`formed()`), its members are the nodes of
// `nodes` (and, between rounds, the joiners that fit the job). A connection that is not a
// member (another config, a surplus node, a taken NODE_RANK, garbage, a silent socket) is
// refused on its own and never changes the job: only members' failures stop it.
// Threading: everything runs on the io_context's thread. Private to src/rendezvous.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "lf/rendezvous/connection.h"
#include "lf/rendezvous/kv_store.h"
#include "lf/rendezvous/server.h"
#include "lf/rendezvous/store_service.h"

namespace lf::rdzv {

using ServerClock = std::chrono::steady_clock;

std::chrono::milliseconds seconds_to_ms(double seconds);
std::string nnodes_text(int64_t lo, int64_t hi);
// "node rank 1 (host h, pid 7)" or "host h (pid 7)" when no rank was asked for.
std::string describe(const JoinMsg& j);

struct RendezvousServer::Impl : std::enable_shared_from_this<Impl> {
  enum class Phase { kJoining, kRunning, kStopping, kFinished };
  enum class Role { kNew, kAgent, kStore };

  struct Peer {
    uint64_t id = 0;
    std::shared_ptr<Connection> conn;
    Role role = Role::kNew;
    JoinMsg join;
    int64_t node_rank = -1;  // once in the layout
    ServerClock::time_point connected, last_seen;
    bool stopped = false;  // reported its workers stopped (kStopping)
    bool done = false;
  };

  boost::asio::io_context& io;
  ServerOptions opt;
  boost::asio::ip::tcp::acceptor acceptor;
  boost::asio::steady_timer join_timer, last_call_timer, heartbeat_timer, stop_timer, accept_retry_timer, status_timer;
  ServerClock::time_point join_deadline;
  bool accept_failing = false;  // warned once per run of failures
  KvStore store;
  std::unique_ptr<StoreService> store_service;
  FinishedHandler on_finished;
  FILE* event_log = nullptr;
  JobRecord record;  // for the live page (job_record.h)
  std::optional<int> finished_code;
  std::string finished_reason;

  Phase phase = Phase::kJoining;
  int64_t generation = 0;
  int64_t restarts_done = 0;
  int64_t base_world = 0;  // the world size of the first round (elastic jobs keep its global batch)
  int64_t round_world = 0;  // the last round's world size: the page shows it after its nodes left
  std::string formed_at;   // wall-clock time the first round formed ("" before): names the job to strangers
  bool restart_pending = false;
  uint64_t next_peer_id = 1;
  std::unordered_map<uint64_t, std::shared_ptr<Peer>> peers;
  std::vector<uint64_t> joiners;      // kJoining: arrival order
  std::map<int64_t, uint64_t> nodes;  // node rank -> peer id (kRunning/kStopping, carried over restarts)

  Impl(boost::asio::io_context& io_, ServerOptions o);
  ~Impl();

  // server.cpp
  void event(const char* name, int64_t node, const std::string& detail);
  void start();
  void accept();
  void admit(boost::asio::ip::tcp::socket s);
  void on_message(uint64_t id, Message&& m);
  void refuse(const std::shared_ptr<Peer>& peer, const std::string& reason, int64_t retry_after_ms = 0);
  void fail_all(const std::string& reason);
  void forget(uint64_t id);
  void close_all();
  void finish(int code, const std::string& reason);

  // server_admission.cpp
  void on_store_hello(const std::shared_ptr<Peer>& peer, const StoreHelloMsg& h);
  void on_join(const std::shared_ptr<Peer>& peer, JoinMsg&& j);
  std::optional<std::string> rank_taken(const JoinMsg& j);
  std::optional<std::string> check_agreement(const JoinMsg& a);
  std::optional<std::string> check_room(const JoinMsg& a);
  void refuse_stranger(const std::shared_ptr<Peer>& peer, const std::string& problem, int64_t retry_after_ms = 0);
  std::string job_identity() const;
  bool is_member(uint64_t id) const;
  bool formed() const { return base_world > 0; }

  // server_rounds.cpp
  void maybe_close_round();
  void arm_join_timer();
  std::optional<std::vector<std::pair<uint64_t, int64_t>>> assign_ranks(std::string* error);
  void close_round();
  void arm_status_timer();
  void report_waiting();
  std::vector<std::string> member_names(const std::vector<uint64_t>& ids);
  int64_t joined_count() const { return static_cast<int64_t>(joiners.size() + nodes.size()); }
  bool elastic() const { return opt.min_nodes < opt.max_nodes; }

  // server_running.cpp
  void on_failure_report(const std::shared_ptr<Peer>& peer, const FailureMsg& f);
  void node_failed(int64_t node, const std::string& reason, bool restartable, int64_t exit_as = 0);
  void on_stopped(const std::shared_ptr<Peer>& peer, const StoppedMsg& s);
  void check_all_stopped();
  void end_stopping();
  void on_done(const std::shared_ptr<Peer>& peer, const DoneMsg& d);
  void on_close(uint64_t id, const std::string& why);
  void heartbeat_tick();
  void close_mute(std::chrono::milliseconds older_than);

  // server_status.cpp: the nodes' statuses and the job's record for the live page
  void on_node_status(const std::shared_ptr<Peer>& peer, NodeStatusMsg&& s);
  void record_round();
  void record_failure(const std::shared_ptr<Peer>& peer, const FailureMsg& f);
  JobView view() const;
};

}  // namespace lf::rdzv
