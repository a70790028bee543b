#include "lf/rendezvous/server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>

#include "lf/common/error.h"
#include "lf/common/json_escape.h"
#include "lf/rendezvous/config_diff.h"
#include "lf/rendezvous/connection.h"
#include "lf/rendezvous/elastic_ranks.h"
#include "lf/rendezvous/kv_store.h"
#include "lf/rendezvous/layout.h"
#include "lf/rendezvous/store_service.h"

namespace lf::rdzv {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

// A connection must say Join or StoreHello within this; else it is closed (descriptors
// held by idle or half-sent connections would starve the real agents).
constexpr auto kHelloTimeout = std::chrono::milliseconds(10000);

std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// Compares without an early exit, so timing reveals nothing about the token.
bool tokens_equal(const std::string& a, const std::string& b) {
  unsigned diff = a.size() != b.size();
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i)
    diff |= static_cast<unsigned char>(i < a.size() ? a[i] : 0) ^ static_cast<unsigned char>(i < b.size() ? b[i] : 0);
  return diff == 0;
}

std::string nnodes_text(int64_t lo, int64_t hi) {
  return lo == hi ? std::to_string(lo) : fmt::format("{}:{}", lo, hi);
}

std::string describe(const JoinMsg& j) {
  return j.node_rank >= 0 ? fmt::format("node rank {} (host {}, pid {})", j.node_rank, j.hostname, j.pid)
                          : fmt::format("host {} (pid {})", j.hostname, j.pid);
}

}  // namespace

struct RendezvousServer::Impl : std::enable_shared_from_this<Impl> {
  enum class Phase { kJoining, kRunning, kStopping, kFinished };
  enum class Role { kNew, kAgent, kStore };

  struct Peer {
    uint64_t id = 0;
    std::shared_ptr<Connection> conn;
    Role role = Role::kNew;
    JoinMsg join;
    int64_t node_rank = -1;  // once in the layout
    Clock::time_point last_seen;
    bool stopped = false;  // reported its workers stopped (kStopping)
    bool done = false;
  };

  asio::io_context& io;
  ServerOptions opt;
  asio::ip::tcp::acceptor acceptor;
  asio::steady_timer join_timer, last_call_timer, heartbeat_timer, stop_timer, accept_retry_timer, status_timer;
  Clock::time_point join_deadline;
  bool accept_failing = false;  // warned once per run of failures
  KvStore store;
  std::unique_ptr<StoreService> store_service;
  FinishedHandler on_finished;
  FILE* event_log = nullptr;

  Phase phase = Phase::kJoining;
  int64_t generation = 0;
  int64_t restarts_done = 0;
  int64_t base_world = 0;  // the world size of the first round (elastic jobs keep its global batch)
  bool restart_pending = false;
  uint64_t next_peer_id = 1;
  std::unordered_map<uint64_t, std::shared_ptr<Peer>> peers;
  std::vector<uint64_t> joiners;        // kJoining: arrival order
  std::map<int64_t, uint64_t> nodes;    // node rank -> peer id (kRunning/kStopping, carried over restarts)

  Impl(asio::io_context& io_, ServerOptions o)
      : io(io_), opt(std::move(o)), acceptor(io_), join_timer(io_), last_call_timer(io_),
        heartbeat_timer(io_), stop_timer(io_), accept_retry_timer(io_), status_timer(io_) {
    store_service = std::make_unique<StoreService>(io, store);
  }

  ~Impl() {
    if (event_log) std::fclose(event_log);
  }

  void event(const char* name, int64_t node, const std::string& detail) {
    double t = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    if (event_log) {
      std::fprintf(event_log, "{\"t\": %.6f, \"event\": \"%s\", \"generation\": %lld, \"node\": %lld, \"detail\": \"%s\"}\n",
                   t, name, static_cast<long long>(generation), static_cast<long long>(node),
                   json_escape(detail).c_str());
      std::fflush(event_log);
    }
    spdlog::debug("rdzv event {} gen={} node={} {}", name, generation, node, detail);
  }

  // ---- start / accept -------------------------------------------------------

  void start() {
    if (!opt.event_log_path.empty()) {
      event_log = std::fopen(opt.event_log_path.c_str(), "a");
      LF_CHECK(event_log, ConfigError, "cannot open event log {}: {}", opt.event_log_path, std::strerror(errno));
    }
    asio::ip::tcp::endpoint ep(asio::ip::make_address(opt.bind_host), opt.port);
    boost::system::error_code ec;
    acceptor.open(ep.protocol(), ec);
    if (!ec) acceptor.set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor.bind(ep, ec);
    LF_CHECK(ec != asio::error::address_in_use, NetworkError,
             "rendezvous port {} on {} is already in use (another lf-train or torchrun job on this host?): "
             "stop it, or pick another port with --master-port / MASTER_PORT on every node",
             opt.port, opt.bind_host);
    LF_CHECK(!ec, NetworkError, "cannot bind the rendezvous server to {}:{}: {}", opt.bind_host, opt.port,
             ec.message());
    acceptor.listen(asio::socket_base::max_listen_connections, ec);
    LF_CHECK(!ec, NetworkError, "cannot listen on {}:{}: {}", opt.bind_host, opt.port, ec.message());
    event("server_started", -1, fmt::format("port {}", acceptor.local_endpoint().port()));
    accept();
    arm_join_timer();
    heartbeat_tick();
    arm_status_timer();
  }

  void accept() {
    acceptor.async_accept([self = shared_from_this()](boost::system::error_code ec, asio::ip::tcp::socket s) {
      if (!self->acceptor.is_open()) return;
      if (!ec) {
        self->accept_failing = false;
        self->admit(std::move(s));
        return self->accept();
      }
      // Out of descriptors (EMFILE) and the like: retrying at once would spin a core and
      // flood the log. Connections mute for a second make room (an agent waiting in the
      // backlog must get in before its own heartbeat timeout); then a retry in 100 ms.
      self->close_mute(std::chrono::seconds(1));
      if (!self->accept_failing)
        spdlog::warn("rendezvous accept failed: {} (retrying every 100 ms; {} connections open)", ec.message(),
                     self->peers.size());
      self->accept_failing = true;
      self->accept_retry_timer.expires_after(std::chrono::milliseconds(100));
      self->accept_retry_timer.async_wait([self](boost::system::error_code tec) {
        if (!tec) self->accept();
      });
    });
  }

  void admit(asio::ip::tcp::socket s) {
    auto peer = std::make_shared<Peer>();
    peer->id = next_peer_id++;
    peer->conn = std::make_shared<Connection>(std::move(s), opt.max_payload);
    peer->last_seen = Clock::now();
    peers[peer->id] = peer;
    std::weak_ptr<Impl> weak = shared_from_this();
    uint64_t id = peer->id;
    peer->conn->start(
        [weak, id](Message&& m) {
          if (auto self = weak.lock()) self->on_message(id, std::move(m));
        },
        [weak, id](const std::string& why) {
          if (auto self = weak.lock()) self->on_close(id, why);
        });
  }

  // ---- messages ---------------------------------------------------------------

  void on_message(uint64_t id, Message&& m) {
    auto it = peers.find(id);
    if (it == peers.end()) return;
    auto peer = it->second;
    peer->last_seen = Clock::now();
    if (peer->role == Role::kNew) {
      if (auto* j = std::get_if<JoinMsg>(&m)) return on_join(peer, std::move(*j));
      if (auto* h = std::get_if<StoreHelloMsg>(&m)) return on_store_hello(peer, *h);
      return refuse(peer, fmt::format("expected Join or StoreHello first, got {}", message_name(m)));
    }
    if (auto* r = std::get_if<StoreRequestMsg>(&m)) return store_service->handle(peer->conn, peer->id, std::move(*r));
    if (peer->role != Role::kAgent) return refuse(peer, fmt::format("unexpected {} on a store connection", message_name(m)));
    if (std::holds_alternative<HeartbeatMsg>(m)) return;
    if (auto* f = std::get_if<FailureMsg>(&m)) return on_failure_report(peer, *f);
    if (auto* s = std::get_if<StoppedMsg>(&m)) return on_stopped(peer, *s);
    if (auto* d = std::get_if<DoneMsg>(&m)) return on_done(peer, *d);
    refuse(peer, fmt::format("unexpected {} from an agent", message_name(m)));
  }

  void refuse(const std::shared_ptr<Peer>& peer, const std::string& reason, int64_t retry_after_ms = 0) {
    event("refused", peer->node_rank, fmt::format("{}: {}", peer->conn->peer(), reason));
    spdlog::warn("rendezvous: refusing {}: {}", peer->conn->peer(), reason);
    peer->conn->send(RefusedMsg{reason, retry_after_ms});
    peer->conn->close_after_flush();
    forget(peer->id);
  }

  // Ends the whole job's rendezvous: every agent gets the same message.
  void fail_all(const std::string& reason) {
    spdlog::error("rendezvous failed: {}", reason);
    event("rendezvous_failed", -1, reason);
    auto all = peers;
    for (auto& [id, p] : all) {
      if (p->role != Role::kAgent) continue;
      p->conn->send(RefusedMsg{reason});
      p->conn->close_after_flush();
      forget(id);
    }
    finish(kExitRendezvous, reason);
  }

  void forget(uint64_t id) {
    auto it = peers.find(id);
    if (it == peers.end()) return;
    store_service->drop(id);
    std::erase(joiners, id);
    if (it->second->node_rank >= 0) {
      auto n = nodes.find(it->second->node_rank);
      if (n != nodes.end() && n->second == id) nodes.erase(n);
    }
    peers.erase(it);
  }

  void on_store_hello(const std::shared_ptr<Peer>& peer, const StoreHelloMsg& h) {
    if (!tokens_equal(h.token, opt.token)) return refuse(peer, "store connection refused: authentication failed");
    if (h.job_id != opt.job_id)
      return refuse(peer, fmt::format("store connection for job '{}', this server runs job '{}'", h.job_id, opt.job_id));
    peer->role = Role::kStore;
  }

  void on_join(const std::shared_ptr<Peer>& peer, JoinMsg&& j) {
    // Say nothing about the expected token or job: a wrong token learns nothing.
    if (!tokens_equal(j.token, opt.token))
      return refuse(peer, "join refused: authentication failed (LF_JOB_TOKEN must be the same on every node)");
    if (j.job_id != opt.job_id)
      return refuse(peer, fmt::format("join refused: {} asks for job '{}' (--rdzv-id / RDZV_ID), this server runs "
                                      "job '{}'", describe(j), j.job_id, opt.job_id));
    peer->join = std::move(j);
    peer->role = Role::kAgent;
    const JoinMsg& jm = peer->join;
    if (phase == Phase::kFinished) return refuse(peer, "the job is over");
    // A node's replacement may join once its predecessor is gone; a live rank is never taken over.
    if (jm.node_rank >= 0 && (generation > 0 || phase != Phase::kJoining)) {
      std::optional<uint64_t> holder_id;
      if (nodes.count(jm.node_rank)) holder_id = nodes.at(jm.node_rank);
      for (uint64_t id : joiners)
        if (peers.at(id)->join.node_rank == jm.node_rank) holder_id = id;
      // Elastic: ranks are renumbered densely each round, so a returning node's NODE_RANK is an
      // order, not a claim (its old number may be another node's now): with room left it waits.
      if (holder_id && !(elastic() && joined_count() < opt.max_nodes)) {
        auto& holder = peers.at(*holder_id);
        // The holder may be dying right now (killed, its EOF not yet read, or silent and about
        // to miss its heartbeats): the claimant may retry until the heartbeat timeout settles it.
        return refuse(peer,
                      fmt::format("join refused: node rank {} is held by a live agent (host {}, pid {}, {}); "
                                  "stop it first or use another NODE_RANK",
                                  jm.node_rank, holder->join.hostname, holder->join.pid, holder->conn->peer()),
                      static_cast<int64_t>(opt.heartbeat_interval_s * 1000));
      }
    }
    // Running or stopping: a node beyond --nnodes fails the job (check_compatible); one that
    // fits (elastic MIN:MAX with room) is parked and joins the next round, at a restart.
    event("join", jm.node_rank, fmt::format("{} from {}", describe(jm), peer->conn->peer()));
    if (auto problem = check_compatible(*peer)) return fail_all(*problem);
    joiners.push_back(peer->id);
    if (phase == Phase::kJoining) return maybe_close_round();
    spdlog::info("rendezvous: {} arrived while the job runs with {} node(s) (--nnodes {}): it joins at the next "
                 "restart", describe(jm), nodes.size(), nnodes_text(opt.min_nodes, opt.max_nodes));
  }

  // nproc/version/hash must agree; node ranks must be unique and in range.
  std::optional<std::string> check_compatible(const Peer& p) {
    const JoinMsg& a = p.join;
    if (a.min_nodes != opt.min_nodes || a.max_nodes != opt.max_nodes)
      return fmt::format("nnodes mismatch: {} was started with --nnodes {}, the rendezvous server (node 0) with {}",
                         describe(a), nnodes_text(a.min_nodes, a.max_nodes), nnodes_text(opt.min_nodes, opt.max_nodes));
    // Members agree with each other already, so one reference member is enough: O(1) per join.
    std::optional<uint64_t> reference;
    if (!nodes.empty()) reference = nodes.begin()->second;
    else if (!joiners.empty()) reference = joiners.front();
    if (reference) {
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
    }
    if (a.node_rank >= 0 && generation == 0) {
      for (uint64_t id : joiners) {
        const JoinMsg& b = peers.at(id)->join;
        if (b.node_rank == a.node_rank)
          return fmt::format("duplicate node rank {}: claimed by {} and by {}", a.node_rank, describe(b), describe(a));
      }
    }
    if (a.node_rank >= opt.max_nodes)
      return fmt::format("node rank {} of {} is out of range for --nnodes {}", a.node_rank, describe(a), opt.max_nodes);
    if (joined_count() + 1 > opt.max_nodes) {
      std::vector<uint64_t> members = joiners;
      for (auto& [rank, id] : nodes) members.push_back(id);
      return fmt::format("more nodes than --nnodes {}: {} arrived after {}", opt.max_nodes, describe(a),
                         fmt::join(member_names(members), ", "));
    }
    return std::nullopt;
  }

  std::vector<std::string> member_names(const std::vector<uint64_t>& ids) {
    std::vector<std::string> out;
    for (uint64_t id : ids) out.push_back(describe(peers.at(id)->join));
    return out;
  }

  int64_t joined_count() const { return static_cast<int64_t>(joiners.size() + nodes.size()); }

  bool elastic() const { return opt.min_nodes < opt.max_nodes; }

  void maybe_close_round() {
    int64_t n = joined_count();
    if (n >= opt.max_nodes) return close_round();
    if (n >= opt.min_nodes) {
      last_call_timer.expires_after(to_ms(opt.last_call_s));
      last_call_timer.async_wait([self = shared_from_this(), gen = generation](boost::system::error_code ec) {
        if (!ec && self->phase == Phase::kJoining && self->generation == gen &&
            self->joined_count() >= self->opt.min_nodes)
          self->close_round();
      });
    }
  }

  void arm_join_timer() {
    join_deadline = Clock::now() + to_ms(opt.join_timeout_s);
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
  std::optional<std::vector<std::pair<uint64_t, int64_t>>> assign_ranks(std::string* error) {
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

  void close_round() {
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
    if (base_world == 0) base_world = world;
    event("layout", -1, fmt::format("{} nodes, world size {}", nodes.size(), world));
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
      p->conn->send(l);
      rank_base += p->join.nproc;
    }
  }

  // ---- waiting: who waits for whom ------------------------------------------------

  void arm_status_timer() {
    if (opt.status_interval_s <= 0) return;
    status_timer.expires_after(to_ms(opt.status_interval_s));
    status_timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec || self->phase == Phase::kFinished) return;
      if (self->phase == Phase::kJoining) self->report_waiting();
      self->arm_status_timer();
    });
  }

  // Node 0's log and every joined agent get the same line: which nodes are in, which are
  // missing, how long the round still waits, and what to check on the missing ones.
  void report_waiting() {
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
    const auto left = std::chrono::duration_cast<std::chrono::seconds>(join_deadline - Clock::now()).count();
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

  // ---- running: failures, stops, completion --------------------------------------

  void on_failure_report(const std::shared_ptr<Peer>& peer, const FailureMsg& f) {
    // A failure that must end the job (Ctrl-C, a config error) sent while a round waits for
    // its nodes (at the start, or for a replacement) ends it at once: waiting on would end
    // only at the join timeout.
    if (!f.restartable && phase == Phase::kJoining)
      return fail_all(fmt::format("{}: {}, while the job waited for nodes to join", describe(peer->join), f.message));
    if (f.generation != generation) return;  // stale: already handled
    std::string what = f.global_rank >= 0
                           ? fmt::format("worker rank {} on node {} ({}) failed: {}", f.global_rank,
                                         peer->node_rank, peer->join.hostname, f.message)
                           : fmt::format("node {} ({}): {}", peer->node_rank, peer->join.hostname, f.message);
    node_failed(peer->node_rank, what, f.restartable, f.exit_as);
  }

  void node_failed(int64_t node, const std::string& reason, bool restartable, int64_t exit_as = 0) {
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
    stop_timer.expires_after(to_ms(opt.stop_timeout_s));
    stop_timer.async_wait([self = shared_from_this(), gen = generation](boost::system::error_code ec) {
      if (ec || self->phase != Phase::kStopping || self->generation != gen) return;
      self->event("stop_timeout", -1, "agents did not report their workers stopped in time");
      self->restart_pending = false;
      self->end_stopping();
    });
    check_all_stopped();
  }

  void on_stopped(const std::shared_ptr<Peer>& peer, const StoppedMsg& s) {
    if (s.generation != generation || phase != Phase::kStopping) return;
    peer->stopped = true;
    if (s.worker_store_port) peer->join.worker_store_port = s.worker_store_port;
    event("node_stopped", peer->node_rank, peer->join.hostname);
    check_all_stopped();
  }

  void check_all_stopped() {
    if (phase != Phase::kStopping) return;
    for (auto& [rank, id] : nodes)
      if (!peers.at(id)->stopped) return;
    end_stopping();
  }

  void end_stopping() {
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

  void on_done(const std::shared_ptr<Peer>& peer, const DoneMsg& d) {
    if (d.generation != generation || phase != Phase::kRunning) return;
    peer->done = true;
    event("node_done", peer->node_rank, peer->join.hostname);
    for (auto& [rank, id] : nodes)
      if (!peers.at(id)->done) return;
    for (auto& [rank, id] : nodes) {
      peers.at(id)->conn->send(FinishedMsg{});
      peers.at(id)->conn->close_after_flush();
    }
    finish(kExitOk, "every node finished");
  }

  void on_close(uint64_t id, const std::string& why) {
    auto it = peers.find(id);
    if (it == peers.end()) return;
    auto peer = it->second;
    int64_t rank = peer->node_rank;
    bool was_node = rank >= 0 && nodes.count(rank) && nodes.at(rank) == id;
    forget(id);
    if (!was_node || phase == Phase::kFinished) return;
    std::string reason = fmt::format("lost the agent of node {} ({}, {}): {}", rank, peer->join.hostname,
                                     peer->conn->peer(), why.empty() ? "closed" : why);
    if (phase == Phase::kStopping) {
      event("node_lost", rank, reason);
      return check_all_stopped();
    }
    node_failed(rank, reason, true);
  }

  // Heartbeats both ways: we ping every agent, and drop agents we have not heard from.
  void heartbeat_tick() {
    auto now = Clock::now();
    auto timeout = to_ms(opt.heartbeat_timeout_s);
    std::vector<std::shared_ptr<Peer>> silent;
    close_mute(kHelloTimeout);
    for (auto& [id, p] : peers) {
      if (p->role != Role::kAgent) continue;
      if (now - p->last_seen > timeout) silent.push_back(p);
      else p->conn->send(HeartbeatMsg{generation});
    }
    for (auto& p : silent) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - p->last_seen).count();
      event("heartbeat_missed", p->node_rank, fmt::format("{} silent for {} ms", p->conn->peer(), ms));
      p->conn->close();  // on_close turns it into a node failure
    }
    if (phase == Phase::kFinished && peers.empty()) return;
    heartbeat_timer.expires_after(to_ms(std::min(opt.heartbeat_interval_s, opt.heartbeat_timeout_s / 4)));
    heartbeat_timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->heartbeat_tick();
    });
  }

  // Closes connections that have said neither Join nor StoreHello for `older_than` (an agent
  // says Join as soon as it connects).
  void close_mute(std::chrono::milliseconds older_than) {
    const auto now = Clock::now();
    std::vector<std::shared_ptr<Peer>> mute;
    for (auto& [id, p] : peers)
      if (p->role == Role::kNew && now - p->last_seen > older_than) mute.push_back(p);
    for (auto& p : mute) {
      event("closed_mute", -1, fmt::format("{}: no Join or StoreHello in {} ms", p->conn->peer(), older_than.count()));
      p->conn->close();
    }
  }

  // close() calls back into on_close(), which edits peers: iterate a copy.
  void close_all() {
    auto all = std::move(peers);
    peers.clear();
    for (auto& [id, p] : all) p->conn->close();
  }

  void finish(int code, const std::string& reason) {
    if (phase == Phase::kFinished) return;
    // Nodes parked for a next round that will not come: told so, instead of a dropped connection.
    for (uint64_t id : std::vector<uint64_t>(joiners))
      if (phase != Phase::kJoining && peers.count(id))
        refuse(peers.at(id), "the job ended before a restart let this node in");
    phase = Phase::kFinished;
    event("finished", -1, fmt::format("exit {}: {}", code, reason));
    join_timer.cancel();
    last_call_timer.cancel();
    stop_timer.cancel();
    status_timer.cancel();
    if (on_finished) {
      auto handler = std::move(on_finished);
      asio::post(io, [handler, code, reason] { handler(code, reason); });
    }
  }
};

RendezvousServer::RendezvousServer(asio::io_context& io, ServerOptions options)
    : impl_(std::make_shared<Impl>(io, std::move(options))) {}

RendezvousServer::~RendezvousServer() {
  boost::system::error_code ignored;
  impl_->acceptor.close(ignored);
  impl_->heartbeat_timer.cancel();
  impl_->join_timer.cancel();
  impl_->last_call_timer.cancel();
  impl_->stop_timer.cancel();
  impl_->accept_retry_timer.cancel();
  impl_->status_timer.cancel();
  impl_->close_all();
}

void RendezvousServer::start(FinishedHandler on_finished) {
  impl_->on_finished = std::move(on_finished);
  impl_->start();
}

uint16_t RendezvousServer::port() const { return impl_->acceptor.local_endpoint().port(); }

void RendezvousServer::shutdown(double timeout_s, std::function<void()> done) {
  auto impl = impl_;
  boost::system::error_code ignored;
  impl->acceptor.close(ignored);
  auto timer = std::make_shared<asio::steady_timer>(impl->io);
  auto deadline = Clock::now() + to_ms(timeout_s);
  // Poll until every queue drained: a few ms granularity is plenty at shutdown.
  auto check = std::make_shared<std::function<void()>>();
  *check = [impl, timer, deadline, done, check] {
    bool pending = false;
    for (auto& [id, p] : impl->peers)
      if (p->conn->is_open() && p->conn->queued_bytes() > 0) pending = true;
    if (!pending || Clock::now() > deadline) {
      impl->close_all();
      impl->heartbeat_timer.cancel();
      auto finish = done;
      *check = nullptr;  // break the self-reference
      finish();
      return;
    }
    timer->expires_after(std::chrono::milliseconds(5));
    timer->async_wait([check](boost::system::error_code) {
      if (*check) (*check)();
    });
  };
  (*check)();
}

}  // namespace lf::rdzv
