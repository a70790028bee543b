#include "lf/agent/worker_group.h"

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <deque>
#include <filesystem>
#include <optional>
#include <thread>

#include "lf/agent/line_relay.h"
#include "lf/common/error.h"

namespace lf::agent {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

std::string WorkerExit::describe() const {
  if (signal) return fmt::format("killed by signal {} ({})", signal, ::strsignal(signal));
  return fmt::format("exited with code {}", exit_code);
}

namespace {

struct Stream {
  Stream(asio::io_context& io, int fd) : desc(io, fd) {}
  asio::posix::stream_descriptor desc;
  std::array<char, 8192> buffer;
};

}  // namespace

struct WorkerGroup::Impl : std::enable_shared_from_this<Impl> {
  struct Worker {
    int local_rank = 0, global_rank = 0;
    pid_t pid = -1;
    bool alive = false;
    std::unique_ptr<Stream> out, err, heartbeat;
    std::unique_ptr<LineRelay> out_relay, err_relay;
    FILE* out_log = nullptr;
    FILE* err_log = nullptr;
    std::unique_ptr<WorkerWatch> watch;
    bool hang_reported = false;
    // An exit is reported once the worker's stdout and stderr reached end of file, so its
    // last lines are relayed before anyone acts on the exit (or after a grace period, when
    // something it started still holds the pipes).
    int open_streams = 2;
    std::optional<WorkerExit> exit;
    std::unique_ptr<asio::steady_timer> exit_grace;
    std::optional<WorkerExit> ended;  // kept for the status, unlike `exit`
    std::deque<OutputLine> new_lines;
    std::string last_line;

    void keep_line(bool is_err, std::string_view line) {
      std::string text(line.substr(0, kMaxKeptLine));
      last_line = text;
      new_lines.push_back({global_rank, is_err, std::move(text)});
      if (new_lines.size() > kKeptLines) new_lines.pop_front();
    }
  };

  Impl(asio::io_context& io_, WorkerGroupOptions o) : io(io_), opt(std::move(o)), kill_timer(io_), watch_timer(io_) {}

  ~Impl() {
    for (auto& w : workers) close_logs(*w);
  }

  asio::io_context& io;
  WorkerGroupOptions opt;
  std::vector<std::unique_ptr<Worker>> workers;
  asio::steady_timer kill_timer, watch_timer;
  ExitHandler on_exit;
  HangHandler on_hang;
  std::function<void()> on_stopped;
  bool stopping = false;  // stop() was called: exits are the stop's doing, not failures

  static void close_logs(Worker& w) {
    if (w.out_relay) w.out_relay->finish();
    if (w.err_relay) w.err_relay->finish();
    if (w.out_log) std::fclose(w.out_log);
    if (w.err_log) std::fclose(w.err_log);
    w.out_log = w.err_log = nullptr;
    w.out_relay.reset();
    w.err_relay.reset();
  }

  void pump(Worker* w, Stream* s, bool is_err) {
    s->desc.async_read_some(asio::buffer(s->buffer), [self = shared_from_this(), w, s, is_err](
                                                          boost::system::error_code ec, size_t n) {
      LineRelay* relay = is_err ? w->err_relay.get() : w->out_relay.get();
      if (ec) {
        if (relay) relay->finish();
        if (--w->open_streams == 0) self->report_exit(w);
        return;
      }
      if (relay) relay->feed(std::string_view(s->buffer.data(), n));
      self->pump(w, s, is_err);
    });
  }

  void report_exit(Worker* w) {
    if (!w->exit) return;
    const WorkerExit e = *w->exit;
    w->exit.reset();
    if (w->exit_grace) w->exit_grace->cancel();
    // Not once a stop began: an exit reported late (its pipes held open by a child of its
    // own, past the grace) must not be charged to the next generation's group.
    if (on_exit && !stopping) on_exit(e);
    maybe_stopped();
  }

  void watch_heartbeat(Worker* w) {
    w->heartbeat->desc.async_read_some(asio::buffer(w->heartbeat->buffer),
                                       [self = shared_from_this(), w](boost::system::error_code ec, size_t n) {
                                         if (ec) return;
                                         w->watch->feed(std::string_view(w->heartbeat->buffer.data(), n), Clock::now());
                                         if (auto problem = w->watch->take_problem())
                                           spdlog::warn("worker rank {}: a heartbeat line counted as liveness only: {}",
                                                        w->global_rank, *problem);
                                         self->watch_heartbeat(w);
                                       });
  }

  // Every 250 ms: a worker past its liveness timeout or its progress deadline is reported once.
  // When several are overdue at once (a stopped rank and the ranks waiting for it in a
  // collective, all past the same step deadline), the stopped one is reported first: the
  // agent acts on the first report, and it should name the cause, not a rank that waits.
  void check_heartbeats() {
    watch_timer.expires_after(std::chrono::milliseconds(250));
    watch_timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec || self->stopping) return;
      const auto now = Clock::now();
      struct Overdue {
        Worker* w;
        std::string why;
        char state;
      };
      std::vector<Overdue> overdue;
      for (auto& w : self->workers) {
        if (!w->alive || w->hang_reported) continue;
        if (auto why = w->watch->overdue(now)) overdue.push_back({w.get(), std::move(*why), process_state(w->pid)});
      }
      const auto rank = [](char state) { return state == 'T' || state == 't' ? 0 : state == 'D' ? 1 : 2; };
      std::stable_sort(overdue.begin(), overdue.end(),
                       [&](const Overdue& a, const Overdue& b) { return rank(a.state) < rank(b.state); });
      for (auto& o : overdue) {
        o.w->hang_reported = true;
        if (o.state) o.why += fmt::format("; process state {}", describe_process_state(o.state));
        if (self->on_hang) self->on_hang(o.w->local_rank, o.w->global_rank, o.w->pid, o.why);
      }
      self->check_heartbeats();
    });
  }

  bool any_alive() const {
    for (auto& w : workers)
      if (w->alive) return true;
    return false;
  }

  void kill_groups(int sig) {
    for (auto& w : workers)
      if (w->pid > 0) ::kill(-w->pid, sig);  // the group: also what the worker started
  }

  void maybe_stopped() {
    if (!on_stopped || any_alive()) return;
    kill_timer.cancel();
    kill_groups(SIGKILL);  // stragglers the workers left in their groups
    auto done = std::move(on_stopped);
    on_stopped = nullptr;
    done();
  }
};

WorkerGroup::WorkerGroup(asio::io_context& io, WorkerGroupOptions options)
    : impl_(std::make_shared<Impl>(io, std::move(options))) {}

WorkerGroup::~WorkerGroup() {
  impl_->stopping = true;  // a retired group reports nothing (its Impl may outlive it in a pipe read)
  impl_->kill_groups(SIGKILL);
  impl_->kill_timer.cancel();
  impl_->watch_timer.cancel();
}

void WorkerGroup::start(std::vector<SpawnSpec> specs, std::vector<int> global_ranks, const std::string& attempt_dir,
                        ExitHandler on_exit, HangHandler on_hang) {
  auto& im = *impl_;
  im.on_exit = std::move(on_exit);
  im.on_hang = std::move(on_hang);
  for (size_t i = 0; i < specs.size(); ++i) {
    auto w = std::make_unique<Impl::Worker>();
    w->local_rank = static_cast<int>(i);
    w->global_rank = global_ranks[i];
    if (!attempt_dir.empty()) {
      auto dir = std::filesystem::path(attempt_dir) / std::to_string(w->global_rank);
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      LF_CHECK(!ec, ConfigError, "cannot create log directory {}: {}", dir.string(), ec.message());
      w->out_log = std::fopen((dir / "stdout.log").c_str(), "w");
      w->err_log = std::fopen((dir / "stderr.log").c_str(), "w");
      LF_CHECK(w->out_log && w->err_log, ConfigError, "cannot write logs in {}", dir.string());
    }
    std::string prefix = fmt::format("[rank {}] ", w->global_rank);
    w->out_relay = std::make_unique<LineRelay>(prefix, im.opt.console ? 1 : -1, w->out_log);
    w->err_relay = std::make_unique<LineRelay>(prefix, im.opt.console ? 2 : -1, w->err_log);
    Impl::Worker* kept = w.get();
    w->out_relay->set_tap([kept](std::string_view line) { kept->keep_line(false, line); });
    w->err_relay->set_tap([kept](std::string_view line) { kept->keep_line(true, line); });
    SpawnedProcess p = spawn_worker(specs[i]);
    w->pid = p.pid;
    w->alive = true;
    w->out = std::make_unique<Stream>(im.io, p.stdout_fd);
    w->err = std::make_unique<Stream>(im.io, p.stderr_fd);
    w->heartbeat = std::make_unique<Stream>(im.io, p.heartbeat_fd);
    w->watch = std::make_unique<WorkerWatch>(im.opt.liveness_timeout_s);
    auto* raw = w.get();
    im.workers.push_back(std::move(w));
    im.pump(raw, raw->out.get(), false);
    im.pump(raw, raw->err.get(), true);
    im.watch_heartbeat(raw);
  }
  im.check_heartbeats();
}

bool WorkerGroup::reap() {
  bool ours = false;
  for (;;) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) break;
    for (auto& w : impl_->workers) {
      if (w->pid != pid || !w->alive) continue;
      ours = true;
      w->alive = false;
      WorkerExit e;
      e.local_rank = w->local_rank;
      e.global_rank = w->global_rank;
      if (WIFSIGNALED(status)) e.signal = WTERMSIG(status);
      else e.exit_code = WEXITSTATUS(status);
      spdlog::debug("worker rank {} (pid {}) {}", e.global_rank, pid, e.describe());
      w->exit = e;
      w->ended = e;
      if (w->open_streams == 0) {
        impl_->report_exit(w.get());
      } else {
        w->exit_grace = std::make_unique<asio::steady_timer>(impl_->io, std::chrono::seconds(2));
        w->exit_grace->async_wait([weak = std::weak_ptr<Impl>(impl_), raw = w.get()](boost::system::error_code ec) {
          if (auto self = weak.lock(); self && !ec) self->report_exit(raw);
        });
      }
    }
  }
  impl_->maybe_stopped();
  return ours;
}

void WorkerGroup::stop(int first_signal, std::function<void()> done) {
  auto& im = *impl_;
  im.on_stopped = std::move(done);
  im.stopping = true;
  im.watch_timer.cancel();
  if (!im.any_alive()) return im.maybe_stopped();
  im.kill_groups(first_signal);
  // A stopped worker (SIGSTOP, the usual hang here) acts on first_signal only once continued.
  im.kill_groups(SIGCONT);
  im.kill_timer.expires_after(std::chrono::milliseconds(static_cast<int64_t>(im.opt.stop_grace_s * 1000)));
  im.kill_timer.async_wait([weak = std::weak_ptr<Impl>(impl_)](boost::system::error_code ec) {
    auto self = weak.lock();
    if (ec || !self) return;
    spdlog::warn("workers still alive {}s after the stop signal: SIGKILL", self->opt.stop_grace_s);
    self->kill_groups(SIGKILL);
  });
}

void WorkerGroup::kill_now() { impl_->kill_groups(SIGKILL); }

bool WorkerGroup::any_alive() const { return impl_->any_alive(); }

std::vector<WorkerStatus> WorkerGroup::status() const {
  std::vector<WorkerStatus> out;
  const auto now = Clock::now();
  for (auto& w : impl_->workers)
    out.push_back({w->local_rank, w->global_rank, w->pid, w->alive, w->watch->status(now), w->ended, w->last_line});
  return out;
}

std::vector<OutputLine> WorkerGroup::take_lines() {
  std::vector<OutputLine> out;
  for (auto& w : impl_->workers) {
    for (auto& l : w->new_lines) out.push_back(std::move(l));
    w->new_lines.clear();
  }
  return out;
}

std::vector<ProgressBeat> WorkerGroup::take_beats(int global_rank) {
  for (auto& w : impl_->workers)
    if (w->global_rank == global_rank) return w->watch->take_beats();
  return {};
}

void kill_leftovers(WorkerGroup* group) {
  if (group) group->kill_now();
  for (int round = 0; round < 20; ++round) {
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    const auto left = live_children_of(::getpid());
    if (left.empty()) return;
    if (round == 0) spdlog::info("stopping {} process(es) the workers left behind", left.size());
    for (pid_t pid : left) ::kill(pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::vector<pid_t> WorkerGroup::pids() const {
  std::vector<pid_t> out;
  for (auto& w : impl_->workers) out.push_back(w->pid);
  return out;
}

}  // namespace lf::agent
