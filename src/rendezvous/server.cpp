// The server's frame: binding, accepting, dispatching messages by the peer's role,
// refusals, the end of the job. The handlers live in server_admission.cpp (joins),
// server_rounds.cpp (forming a round) and server_running.cpp (a formed round).
#include "lf/rendezvous/server.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>

#include "lf/common/error.h"
#include "lf/common/json_escape.h"
#include "server_impl.h"

namespace lf::rdzv {

namespace asio = boost::asio;
using Clock = ServerClock;

std::chrono::milliseconds seconds_to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

std::string nnodes_text(int64_t lo, int64_t hi) {
  return lo == hi ? std::to_string(lo) : fmt::format("{}:{}", lo, hi);
}

std::string describe(const JoinMsg& j) {
  return j.node_rank >= 0 ? fmt::format("node rank {} (host {}, pid {})", j.node_rank, j.hostname, j.pid)
                          : fmt::format("host {} (pid {})", j.hostname, j.pid);
}

RendezvousServer::Impl::Impl(asio::io_context& io_, ServerOptions o)
    : io(io_), opt(std::move(o)), acceptor(io_), join_timer(io_), last_call_timer(io_), heartbeat_timer(io_),
      stop_timer(io_), accept_retry_timer(io_), status_timer(io_) {
  store_service = std::make_unique<StoreService>(io, store);
}

RendezvousServer::Impl::~Impl() {
  if (event_log) std::fclose(event_log);
}

void RendezvousServer::Impl::event(const char* name, int64_t node, const std::string& detail) {
  double t = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (event_log) {
    std::fprintf(event_log, "{\"t\": %.6f, \"event\": \"%s\", \"generation\": %lld, \"node\": %lld, \"detail\": \"%s\"}\n",
                 t, name, static_cast<long long>(generation), static_cast<long long>(node), json_escape(detail).c_str());
    std::fflush(event_log);
  }
  spdlog::debug("rdzv event {} gen={} node={} {}", name, generation, node, detail);
}

// ---- start / accept -------------------------------------------------------

void RendezvousServer::Impl::start() {
  if (!opt.event_log_path.empty()) {
    event_log = std::fopen(opt.event_log_path.c_str(), "a");
    LF_CHECK(event_log, ConfigError, "cannot open event log {}: {}", opt.event_log_path, std::strerror(errno));
  }
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(opt.bind_host, ec);
  LF_CHECK(!ec, ConfigError, "the rendezvous server's bind address '{}' is not an IP address: {}", opt.bind_host,
           ec.message());
  asio::ip::tcp::endpoint ep(address, opt.port);
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
  event("server_started", -1, fmt::format("{}:{}", opt.bind_host, acceptor.local_endpoint().port()));
  accept();
  arm_join_timer();
  heartbeat_tick();
  arm_status_timer();
}

void RendezvousServer::Impl::accept() {
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

void RendezvousServer::Impl::admit(asio::ip::tcp::socket s) {
  auto peer = std::make_shared<Peer>();
  peer->id = next_peer_id++;
  peer->conn = std::make_shared<Connection>(std::move(s), opt.max_payload);
  peer->conn->refuse_protocol_errors();
  peer->connected = peer->last_seen = Clock::now();
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
// A new connection's first message says its role (Join: an agent, StoreHello: a store
// client); each role has its own messages. A message is one variant alternative, so a new
// one is a struct in messages.h, its codec, and one line here (NodeStatus: issue 35's page).

void RendezvousServer::Impl::on_message(uint64_t id, Message&& m) {
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
  if (auto* s = std::get_if<NodeStatusMsg>(&m)) return on_node_status(peer, std::move(*s));
  refuse(peer, fmt::format("unexpected {} from an agent", message_name(m)));
}

void RendezvousServer::Impl::refuse(const std::shared_ptr<Peer>& peer, const std::string& reason,
                                    int64_t retry_after_ms) {
  event("refused", peer->node_rank, fmt::format("{}: {}", peer->conn->peer(), reason));
  spdlog::warn("rendezvous: refusing {}: {}", peer->conn->peer(), reason);
  peer->conn->send(RefusedMsg{reason, retry_after_ms});
  peer->conn->close_after_flush();
  forget(peer->id);
}

// Ends the whole job's rendezvous: every agent gets the same message.
void RendezvousServer::Impl::fail_all(const std::string& reason) {
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

void RendezvousServer::Impl::forget(uint64_t id) {
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

// close() calls back into on_close(), which edits peers: iterate a copy.
void RendezvousServer::Impl::close_all() {
  auto all = std::move(peers);
  peers.clear();
  for (auto& [id, p] : all) p->conn->close();
}

void RendezvousServer::Impl::finish(int code, const std::string& reason) {
  if (phase == Phase::kFinished) return;
  // Nodes parked for a next round that will not come: told so, instead of a dropped connection.
  for (uint64_t id : std::vector<uint64_t>(joiners))
    if (phase != Phase::kJoining && peers.count(id))
      refuse(peers.at(id), "the job ended before a restart let this node in");
  phase = Phase::kFinished;
  finished_code = code;
  finished_reason = reason;
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

// ---- the public face ------------------------------------------------------------

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

JobView RendezvousServer::job_view() const { return impl_->view(); }

std::string RendezvousServer::bound_address() const { return impl_->acceptor.local_endpoint().address().to_string(); }

void RendezvousServer::shutdown(double timeout_s, std::function<void()> done) {
  auto impl = impl_;
  boost::system::error_code ignored;
  impl->acceptor.close(ignored);
  auto timer = std::make_shared<asio::steady_timer>(impl->io);
  auto deadline = Clock::now() + seconds_to_ms(timeout_s);
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
