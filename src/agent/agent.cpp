#include "lf/agent/agent.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <sys/wait.h>

#include <csignal>
#include <filesystem>
#include <optional>

#include "lf/agent/address_probe.h"
#include "lf/agent/hosted_server.h"
#include "lf/agent/node_scratch.h"
#include "lf/agent/rank_reports.h"
#include "lf/agent/status_reporter.h"
#include "lf/agent/worker_env.h"
#include "lf/agent/worker_group.h"
#include "lf/agent/worker_process.h"
#include "lf/common/env.h"
#include "lf/common/error.h"
#include "lf/common/hostname.h"
#include "lf/common/output_lock.h"
#include "lf/common/version.h"
#include "lf/common/self_connect.h"
#include "lf/common/signal_ignored.h"
#include "lf/metrics/node_exporter.h"
#include "lf/rendezvous/connection.h"
#include "lf/rendezvous/server.h"

namespace lf::agent {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

std::chrono::milliseconds to_ms(double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); }
// A free TCP port for the workers' own store (rank 0 binds it after we exit the probe).
uint16_t pick_free_port(asio::io_context& io) {
  return tcp::acceptor(io, tcp::endpoint(tcp::v4(), 0)).local_endpoint().port();
}

class Agent {
 public:
  explicit Agent(const AgentOptions& o)
      : opt_(o), signals_(io_, SIGINT, SIGTERM), child_signal_(io_, SIGCHLD), connect_timer_(io_), connect_deadline_(io_),
        heartbeat_timer_(io_), exit_timer_(io_), reporter_(io_, [this](const rdzv::NodeStatusMsg& s) {
          if (conn_ && conn_->is_open()) conn_->send(s);
        }) {
    if (!signal_ignored(SIGHUP)) signals_.add(SIGHUP);  // a closed terminal stops the job as SIGTERM does
  }

  int run() {
    // Resolve the command first: a typo fails here, before any node waits for us.
    resolve_executable(opt_.command.at(0), env_string("PATH").value_or("/usr/bin:/bin"));
    // Orphans of our workers' workers re-parent to us, so nothing escapes the stop.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    base_env_ = environment_map();
    if (opt_.host_server) start_server();
    else if (opt_.host_server_if_free) host_unless_served();
    if (opt_.metrics_port >= 0) start_metrics();
    if (opt_.ui_port >= 0) start_page();
    join_deadline_ = Clock::now() + to_ms(opt_.join_timeout_s);
    watch_interrupts();
    watch_children();
    connect();
    io_.run();
    return exit_code_;
  }

 private:
  enum class State { kJoining, kRunning, kStopping, kWaitingNextRound, kDone, kExiting };

  // ---- rendezvous ---------------------------------------------------------------

  void start_server() {
    server_ = start_hosted_server(io_, opt_, [this](int code, const std::string& reason) {
      server_finished_ = true;
      spdlog::debug("rendezvous server finished: {} ({})", code, reason);
      if (state_ == State::kExiting) finish_exit();
    });
    opt_.master_port = server_->port();  // resolves port 0 (single node)
    if (!opt_.output_lock_dir.empty()) output_lock_ = OutputLock::acquire(opt_.output_lock_dir, opt_.output_lock_job);
  }

  // ---- metrics (lf/metrics/node_exporter.h): pulled on this thread at each scrape and tick.

  void start_metrics() {
    auto eo = metrics::ExporterOptions::from_env(static_cast<uint16_t>(opt_.metrics_port));
    if (!opt_.metrics_addr.empty()) eo.bind_host = opt_.metrics_addr;
    exporter_ = std::make_unique<metrics::NodeExporter>(
        io_, eo,
        [this] { return group_ ? rank_reports(*group_, layout_) : std::vector<metrics::RankReport>{}; },
        [this] {
          metrics::AgentFacts f;
          f.node_rank = state_ == State::kJoining && generation_ == 0 ? opt_.node_rank : layout_.node_rank;
          f.generation = generation_;
          f.restarts = generation_;  // each restart is a new generation
          f.hostname = this_hostname();
          f.rdzv_id = opt_.rdzv_id;
          f.version = kVersion;
          if (conn_ && conn_->is_open())
            f.master_silence_s = std::chrono::duration<double>(Clock::now() - last_server_message_).count();
          return f;
        });
    exporter_->start();
    reporter_.share_gpu_sampler(exporter_->gpu_sampler());  // the node status' GPUs: one NVML sampler
  }

  // The live page (lf/ui/job_page.h) on node 0; each node sends its status (status_reporter.h) when asked.
  void start_page() {
    if (server_) page_ = start_hosted_page(io_, opt_, *server_);
    else spdlog::info("ui: the job's live page is served by node 0 (--ui-port there); this node sends it its status");
  }

  // No NODE_RANK and MASTER_ADDR is this host: the first agent there hosts the server (as
  // torchrun's c10d rendezvous does). A server already answering (a standalone rdzv-server, an
  // agent with NODE_RANK=0 or one that was faster) is joined instead; so is one that takes the
  // port between our probe and our bind.
  void host_unless_served() {
    if (server_answers(opt_.master_addr, opt_.master_port, std::chrono::milliseconds(1000))) {
      spdlog::info("rendezvous: a server already listens on {}:{}: joining it (node rank by arrival)",
                   opt_.master_addr, opt_.master_port);
      return;
    }
    try {
      start_server();
      spdlog::info("rendezvous: no NODE_RANK and MASTER_ADDR={} is this host: this node hosts the rendezvous "
                   "server (the other nodes join it with the same MASTER_ADDR and MASTER_PORT)", opt_.master_addr);
    } catch (const NetworkError& e) {
      server_.reset();
      spdlog::info("rendezvous: port {} was taken meanwhile ({}): joining the server there", opt_.master_port,
                   e.what());
    }
  }

  void connect() {
    auto resolver = std::make_shared<tcp::resolver>(io_);
    resolver->async_resolve(
        opt_.master_addr, std::to_string(opt_.master_port),
        [this, resolver](boost::system::error_code ec, tcp::resolver::results_type results) {
          if (ec) return retry_connect(fmt::format("cannot resolve {}: {}", opt_.master_addr, ec.message()));
          auto socket = std::make_shared<tcp::socket>(io_);
          // A host that drops SYNs never answers: the kernel would retry for ~2 minutes. The
          // join deadline closes the attempt (a retry after a refusal, past it, gets 2 s), and
          // retry_connect reports it.
          connect_deadline_.expires_at(std::max(join_deadline_, Clock::now() + std::chrono::seconds(2)));
          connect_deadline_.async_wait([socket](boost::system::error_code ec) {
            if (!ec) socket->close();
          });
          asio::async_connect(*socket, results, [this, socket](boost::system::error_code ec, const tcp::endpoint&) {
            connect_deadline_.cancel();
            if (ec == asio::error::operation_aborted)
              return retry_connect("no answer (connection attempts timed out: a firewall dropping packets, or a "
                                   "host that is down?)");
            if (ec) return retry_connect(ec.message());
            if (connected_to_itself(socket->native_handle()))  // closed as the handler ends: the port is free again
              return retry_connect("connection refused (the dial connected to itself: nothing listens there yet)");
            on_connected(std::move(*socket));
          });
        });
  }

  void retry_connect(const std::string& error) {
    if (state_ == State::kExiting) return;
    if (Clock::now() + connect_backoff_ > join_deadline_) {
      return exit_with(kExitNetwork,
                       fmt::format("could not reach the rendezvous server at {}:{} within {}s (last error: {}). "
                                   "Check that node 0 (NODE_RANK=0) is running lf-train, that MASTER_ADDR is its "
                                   "address as seen from this host, and that TCP port {} is open between them",
                                   opt_.master_addr, opt_.master_port, opt_.join_timeout_s, error, opt_.master_port));
    }
    spdlog::debug("rendezvous server {}:{} not reachable ({}); retrying in {} ms", opt_.master_addr,
                  opt_.master_port, error, connect_backoff_.count());
    if (opt_.status_interval_s > 0 && Clock::now() - last_status_ >= to_ms(opt_.status_interval_s)) {
      last_status_ = Clock::now();
      const auto left = std::chrono::duration_cast<std::chrono::seconds>(join_deadline_ - Clock::now()).count();
      spdlog::info("rendezvous: waiting for the server at {}:{} ({}), {} s left; check that node 0 (NODE_RANK=0) "
                   "runs lf-train with MASTER_PORT={}, that MASTER_ADDR={} is its address as seen from this host, "
                   "and that TCP port {} is open between them",
                   opt_.master_addr, opt_.master_port, error, std::max<int64_t>(0, left), opt_.master_port,
                   opt_.master_addr, opt_.master_port);
    }
    connect_timer_.expires_after(connect_backoff_);
    connect_backoff_ = std::min(connect_backoff_ * 2, std::chrono::milliseconds(2000));
    connect_timer_.async_wait([this](boost::system::error_code ec) {
      if (!ec) connect();
    });
  }

  void on_connected(tcp::socket socket) {
    conn_ = std::make_shared<rdzv::Connection>(std::move(socket), rdzv::kDefaultMaxPayload);
    conn_->start([this](rdzv::Message&& m) { on_message(std::move(m)); },
                 [this](const std::string& why) { on_connection_lost(why); });
    last_server_message_ = Clock::now();
    send_join();
    heartbeat_tick();
  }

  void send_join() {
    rdzv::JoinMsg j;
    j.job_id = opt_.rdzv_id;
    j.token = opt_.token;
    j.node_rank = opt_.node_rank;
    j.nproc = opt_.nproc;
    j.hostname = this_hostname();
    j.version = kVersion;
    j.config_hash = opt_.config_hash;
    j.pid = ::getpid();
    j.min_nodes = opt_.min_nodes;
    j.max_nodes = opt_.max_nodes;
    j.worker_store_port = worker_store_port_ = pick_free_port(io_);
    j.config_items = opt_.config_items;
    conn_->send(j);
  }

  void heartbeat_tick() {
    if (!conn_ || !conn_->is_open()) return;
    auto silent = Clock::now() - last_server_message_;
    if (silent > to_ms(opt_.heartbeat_timeout_s)) {
      return lost_server(fmt::format("no message from the rendezvous server at {}:{} for {:.1f}s (network cut or "
                                     "node 0 hung)", opt_.master_addr, opt_.master_port,
                                     std::chrono::duration<double>(silent).count()));
    }
    conn_->send(rdzv::HeartbeatMsg{generation_});
    heartbeat_timer_.expires_after(to_ms(std::min(opt_.heartbeat_interval_s, opt_.heartbeat_timeout_s / 4)));
    heartbeat_timer_.async_wait([this](boost::system::error_code ec) {
      if (!ec) heartbeat_tick();
    });
  }

  void on_message(rdzv::Message&& m) {
    last_server_message_ = Clock::now();
    std::visit(
        [this](auto& msg) {
          using T = std::decay_t<decltype(msg)>;
          if constexpr (std::is_same_v<T, rdzv::LayoutMsg>) on_layout(msg);
          else if constexpr (std::is_same_v<T, rdzv::AbortMsg>) on_abort(msg);
          else if constexpr (std::is_same_v<T, rdzv::RefusedMsg>) on_refused(msg);
          else if constexpr (std::is_same_v<T, rdzv::WaitingMsg>) {
            if (!server_) spdlog::info("{}", msg.text);  // node 0's server logged it already
          }
          else if constexpr (std::is_same_v<T, rdzv::FinishedMsg>) {
            finished_ = true;
            exit_with(kExitOk, "");
          }
        },
        m);
  }

  // A rank held by a dying agent clears once the server sees it die (at most its heartbeat
  // timeout): retry until then; a rank held by a healthy agent stays refused.
  void on_refused(const rdzv::RefusedMsg& msg) {
    auto now = Clock::now();
    if (msg.retry_after_ms > 0 && state_ == State::kJoining) {
      if (!first_retryable_refusal_) first_retryable_refusal_ = now;
      if (now - *first_retryable_refusal_ < to_ms(opt_.heartbeat_timeout_s + 2 * opt_.heartbeat_interval_s)) {
        spdlog::info("{}; retrying in {} ms", msg.reason, msg.retry_after_ms);
        retrying_join_ = true;
        conn_->close();
        heartbeat_timer_.cancel();
        connect_timer_.expires_after(std::chrono::milliseconds(msg.retry_after_ms));
        connect_timer_.async_wait([this](boost::system::error_code ec) {
          retrying_join_ = false;
          if (!ec) connect();
        });
        return;
      }
    }
    // Named from this side (MASTER_ADDR, --rdzv-id): a node refused for its token learns
    // nothing from the server about the job it reached.
    exit_with(kExitRendezvous, fmt::format("rendezvous refused by the server at {}:{} (this node asked for job '{}'): "
                                           "{}", opt_.master_addr, opt_.master_port, opt_.rdzv_id, msg.reason));
  }

  void on_connection_lost(const std::string& why) {
    if (state_ == State::kExiting || finished_ || retrying_join_) return;
    lost_server(fmt::format("lost the connection to the rendezvous server at {}:{}: {}", opt_.master_addr,
                            opt_.master_port, why.empty() ? "closed" : why));
  }

  void lost_server(const std::string& why) {
    if (state_ == State::kExiting) return;
    // Already told to stop: the server going away is expected, the abort is the reason.
    if (abort_received_ && !abort_restart_) return exit_with(job_exit_code(), abort_reason_);
    exit_with(kExitNetwork, why);
  }

  // ---- generations ------------------------------------------------------------

  void on_layout(const rdzv::LayoutMsg& l) {
    if (state_ == State::kExiting) return;
    // Elastic rounds renumber densely: a node after a lost one moves down.
    const std::string was = l.generation > 0 && layout_.nnodes > 0 && layout_.node_rank != l.node_rank
                                ? fmt::format(", was node {} of {}", layout_.node_rank, layout_.nnodes)
                                : std::string();
    layout_ = l;
    generation_ = l.generation;
    abort_received_ = false;
    local_failure_ = false;
    local_failure_exit_ = kExitWorkerFailed;
    abort_exit_as_ = 0;
    spdlog::info("node {} of {}: ranks {}..{} of {} (generation {}{})", l.node_rank, l.nnodes, l.rank_base,
                 l.rank_base + l.nproc - 1, l.world_size, l.generation, was);
    WorkerEnvContext ctx;
    ctx.layout = l;
    ctx.master_addr = opt_.master_addr;
    ctx.rdzv_addr = opt_.master_addr;
    ctx.rdzv_port = opt_.master_port;
    ctx.run_id = opt_.rdzv_id;
    if (l.nproc > 1) ctx.scratch_dir = scratch_.path().string();  // what a node's workers share
    std::vector<SpawnSpec> specs;
    std::vector<int> ranks;
    for (int64_t i = 0; i < l.nproc; ++i) {
      SpawnSpec s;
      s.argv = opt_.command;
      s.env = worker_environment(base_env_, ctx, i);
      specs.push_back(std::move(s));
      ranks.push_back(static_cast<int>(l.rank_base + i));
    }
    WorkerGroupOptions go;
    go.log_dir = opt_.log_dir;
    go.console = !opt_.redirect;
    go.stop_grace_s = opt_.stop_grace_s;
    go.liveness_timeout_s = opt_.worker_heartbeat_timeout_s;
    group_ = std::make_unique<WorkerGroup>(io_, go);
    reporter_.begin(group_.get(), l.generation, l.status_interval_ms);
    std::string attempt_dir;
    if (!opt_.log_dir.empty())
      attempt_dir = (std::filesystem::path(opt_.log_dir) / opt_.rdzv_id / fmt::format("attempt_{}", l.generation)).string();
    exited_ok_ = 0;
    state_ = State::kRunning;
    try {
      group_->start(std::move(specs), ranks, attempt_dir, [this](const WorkerExit& e) { on_worker_exit(e); },
                    [this](int, int global, pid_t pid, const std::string& why) {
                      // Restartable, as a crash is: a hang is as often transient (a flaky link).
                      report_local_failure(global, 0, 0, true,
                                           fmt::format("hung (pid {}, node {}): {}", pid, layout_.node_rank, why));
                    });
    } catch (const Error& e) {  // the workers could not start (a command that cannot run: exit 2)
      local_failure_exit_ = e.exit_code();
      report_local_failure(-1, 0, 0, false, e.what(), e.exit_code() == kExitConfig ? kExitConfig : 0);
    }
  }

  void on_worker_exit(const WorkerExit& e) {
    if (state_ != State::kRunning) return;
    reporter_.send_now();  // node 0's page shows the exit before the failure it causes
    if (e.signal == 0 && e.exit_code == 0) {
      if (++exited_ok_ == layout_.nproc) {
        state_ = State::kDone;
        spdlog::info("all {} workers of node {} finished", layout_.nproc, layout_.node_rank);
        conn_->send(rdzv::DoneMsg{generation_});
      }
      return;
    }
    // Exit 2 is a configuration or data error (lf-worker's ConfigError, a script's bad
    // arguments): the same input fails the same way again, so it is never restarted and
    // every node ends with 2.
    if (e.signal == 0 && e.exit_code == kExitConfig) {
      local_failure_exit_ = kExitConfig;
      return report_local_failure(e.global_rank, e.exit_code, 0, false,
                                  e.describe() + " (a configuration or data error: not restarted)", kExitConfig);
    }
    report_local_failure(e.global_rank, e.exit_code, e.signal, true, e.describe());
  }

  void report_local_failure(int global_rank, int code, int sig, bool restartable, const std::string& what,
                            int exit_as = 0) {
    if (state_ != State::kRunning && state_ != State::kJoining && state_ != State::kDone) return;
    local_failure_ = true;
    failure_message_ = global_rank >= 0 ? fmt::format("worker rank {} {}", global_rank, what) : what;
    spdlog::error("{}: stopping this node's workers and the job", failure_message_);
    rdzv::FailureMsg f;
    f.generation = generation_;
    f.node_rank = layout_.node_rank;
    f.global_rank = global_rank;
    f.exit_code = code;
    f.signal = sig;
    f.restartable = restartable;
    f.message = what;
    f.exit_as = exit_as;
    if (conn_) conn_->send(f);
    stop_workers(SIGTERM);
  }

  void on_abort(const rdzv::AbortMsg& a) {
    if (a.generation != generation_) return;
    abort_received_ = true;
    abort_restart_ = a.restart;
    abort_reason_ = a.reason;
    abort_exit_as_ = a.exit_as;
    // Also after a failure of our own when the server names another node's: ours is then most
    // likely its consequence (a peer vanished mid-collective), and every node's log should
    // name the worker that failed first.
    if (!local_failure_ || a.failed_node != layout_.node_rank)
      spdlog::error("job aborted by the rendezvous server: {}", a.reason);
    stop_workers(SIGTERM);
  }

  void stop_workers(int sig) {
    if (state_ == State::kStopping || state_ == State::kExiting) return;
    state_ = State::kStopping;
    if (!group_) return on_workers_stopped();
    group_->stop(sig, [this] { on_workers_stopped(); });
  }

  // Workers are gone; what next depends on what the server said.
  void on_workers_stopped() {
    if (state_ != State::kStopping) return;
    if (!abort_received_) {
      // Our own failure: wait for the server's verdict (restart or stop).
      state_ = State::kWaitingNextRound;
      return;
    }
    after_abort();
  }

  void after_abort() {
    if (conn_) conn_->send(rdzv::StoppedMsg{generation_, worker_store_port_});
    if (abort_restart_) {
      state_ = State::kWaitingNextRound;
      spdlog::warn("restarting the workers in the next generation ({})", abort_reason_);
      return;
    }
    exit_with(job_exit_code(), local_failure_ ? failure_message_ : fmt::format("job aborted: {}", abort_reason_));
  }

  // This node's own failure's code; else the one the server named for every node (2 for a
  // config/data error elsewhere); else "another node failed".
  int job_exit_code() const {
    if (local_failure_) return local_failure_exit_;
    return abort_exit_as_ ? static_cast<int>(abort_exit_as_) : kExitAborted;
  }

  // ---- signals and exit ----------------------------------------------------------

  void watch_interrupts() {
    signals_.async_wait([this](boost::system::error_code ec, int sig) {
      if (ec) return;
      if (state_ == State::kExiting) {
        // Leaving already (node 0 gives the other agents time to hear of it): another
        // interrupt means now.
        spdlog::warn("{} again: leaving now", ::strsignal(sig));
        if (!interrupted_by_) interrupted_by_ = sig;
        exit_code_ = 128 + interrupted_by_;
        if (group_) group_->kill_now();
        server_finished_ = true;
        exit_timer_armed_ = true;
        return finish_exit();
      }
      if (interrupted_by_) {
        // A second interrupt: the user means it. No more grace.
        spdlog::warn("second {}: killing workers now", ::strsignal(sig));
        if (group_) group_->kill_now();
        return watch_interrupts();
      }
      interrupted_by_ = sig;
      spdlog::warn("received {}: stopping workers", ::strsignal(sig));
      if (conn_ && conn_->is_open()) {
        rdzv::FailureMsg f;
        f.generation = generation_;
        f.node_rank = layout_.node_rank;
        f.restartable = false;
        f.signal = sig;
        f.message = fmt::format("agent interrupted by {}", ::strsignal(sig));
        conn_->send(f);
      }
      abort_received_ = true;
      abort_restart_ = false;
      abort_reason_ = "interrupted";
      watch_interrupts();
      if (!group_ || !group_->any_alive() || state_ == State::kStopping) {
        if (state_ != State::kStopping) after_abort();
        return;
      }
      state_ = State::kRunning;
      stop_workers(sig);
    });
  }

  void watch_children() {
    child_signal_.async_wait([this](boost::system::error_code ec, int) {
      if (ec) return;
      if (group_) group_->reap();
      else while (::waitpid(-1, nullptr, WNOHANG) > 0) {}
      watch_children();
    });
  }

  void exit_with(int code, const std::string& why) {
    if (state_ == State::kExiting) return;
    if (interrupted_by_) code = 128 + interrupted_by_;
    exit_code_ = code;
    if (code != kExitOk && !why.empty()) spdlog::error("{}", why);
    bool workers_alive = group_ && group_->any_alive();
    state_ = State::kExiting;
    if (workers_alive) {
      group_->stop(SIGTERM, [this] { finish_exit(); });
      return;
    }
    finish_exit();
  }

  // Leaves once workers are gone and, on node 0, once the other agents got the word.
  void finish_exit() {
    if (group_ && group_->any_alive()) return;
    kill_leftovers(group_.get());
    if (server_ && !server_finished_ && !exit_timer_armed_) {
      // The server still has agents to tell (abort, finished): give it until the stop deadline.
      exit_timer_armed_ = true;
      exit_timer_.expires_after(to_ms(opt_.stop_grace_s + 2 * opt_.heartbeat_timeout_s + 5));
      exit_timer_.async_wait([this](boost::system::error_code ec) {
        if (ec) return;
        server_finished_ = true;
        finish_exit();
      });
      return;
    }
    if (server_ && !server_finished_) return;
    // A last scrape (LF_METRICS_LINGER_S) and the open page's last poll (LF_UI_LINGER_S) see the
    // job's end before the endpoints go.
    if (!lingered_) {
      lingered_ = true;
      reporter_.stop();
      const auto one_done = [this] {
        if (--lingering_ == 0) finish_exit();
      };
      if (exporter_ && exporter_->linger(one_done)) ++lingering_;
      if (page_ && page_->linger(one_done)) ++lingering_;
    }
    if (lingering_ > 0) return;
    exit_timer_.cancel();
    heartbeat_timer_.cancel();
    connect_timer_.cancel();
    if (exporter_) exporter_->stop();
    if (page_) page_->stop();
    connect_deadline_.cancel();
    signals_.cancel();
    child_signal_.cancel();
    if (conn_) conn_->close_after_flush();
    if (server_) {
      server_->shutdown(2.0, [this] { io_.stop(); });
    } else {
      // Let the last frames (Stopped, Done) leave before the loop ends.
      exit_timer_.expires_after(std::chrono::milliseconds(20));
      exit_timer_.async_wait([this](boost::system::error_code) { io_.stop(); });
    }
  }

  AgentOptions opt_;
  NodeScratch scratch_;  // outlives the worker group below: removed once every worker is gone
  asio::io_context io_;
  asio::signal_set signals_, child_signal_;
  asio::steady_timer connect_timer_, connect_deadline_, heartbeat_timer_, exit_timer_;
  std::unique_ptr<rdzv::RendezvousServer> server_;
  std::unique_ptr<OutputLock> output_lock_;
  std::shared_ptr<rdzv::Connection> conn_;
  std::unique_ptr<WorkerGroup> group_;
  std::unique_ptr<metrics::NodeExporter> exporter_;
  std::unique_ptr<ui::JobPage> page_;
  bool lingered_ = false;
  int lingering_ = 0;
  StatusReporter reporter_;
  std::map<std::string, std::string> base_env_;
  rdzv::LayoutMsg layout_;
  State state_ = State::kJoining;
  int64_t generation_ = 0;
  int64_t exited_ok_ = 0;
  uint16_t worker_store_port_ = 0;
  bool abort_received_ = false, abort_restart_ = false, local_failure_ = false, finished_ = false;
  bool server_finished_ = false, exit_timer_armed_ = false, retrying_join_ = false;
  std::optional<Clock::time_point> first_retryable_refusal_;
  int interrupted_by_ = 0;
  std::string abort_reason_, failure_message_;
  Clock::time_point join_deadline_, last_server_message_, last_status_ = Clock::now();
  int64_t abort_exit_as_ = 0;
  std::chrono::milliseconds connect_backoff_{100};
  int exit_code_ = kExitInternal;
  int local_failure_exit_ = kExitWorkerFailed;  // this node's failure: a worker's, or its own (config)
};

}  // namespace

int run_agent(const AgentOptions& options) {
  Agent agent(options);
  return agent.run();
}

}  // namespace lf::agent
