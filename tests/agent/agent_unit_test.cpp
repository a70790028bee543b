#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <thread>

#include <filesystem>
#include <fstream>

#include "lf/agent/console_writer.h"
#include "lf/agent/gpu_inventory.h"
#include "lf/agent/line_relay.h"
#include "lf/agent/status_reporter.h"
#include "lf/agent/worker_env.h"
#include "lf/agent/worker_group.h"
#include "lf/agent/worker_watch.h"
#include "lf/agent/worker_process.h"
#include "lf/common/error.h"
#include "lf/common/heartbeat_line.h"

using namespace lf::agent;

TEST(GpuInventory, CudaVisibleDevicesWinsOverTheDriver) {
  auto dir = std::filesystem::temp_directory_path() / ("lf-gpus-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const char* bus : {"0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:00.0"})
    std::filesystem::create_directories(dir / bus);
  EXPECT_EQ(visible_gpu_count(std::nullopt, dir), 4);
  EXPECT_EQ(visible_gpu_count(std::string("0,2,3"), dir), 3);
  EXPECT_EQ(visible_gpu_count(std::string(""), dir), 0);
  EXPECT_EQ(visible_gpu_count(std::string("-1"), dir), 0);
  EXPECT_EQ(visible_gpu_count(std::string("1,-1,2"), dir), 1);
  EXPECT_EQ(visible_gpu_count(std::nullopt, dir / "missing"), 0);
  // From the environment: set but empty hides every GPU (it once counted as unset: all 4).
  ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
  EXPECT_EQ(visible_gpu_count_from_env(dir), 0);
  ::setenv("CUDA_VISIBLE_DEVICES", "3,1", 1);
  EXPECT_EQ(visible_gpu_count_from_env(dir), 2);
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(visible_gpu_count_from_env(dir), 4);
  std::filesystem::remove_all(dir);
}

TEST(LineRelay, EmitsWholePrefixedLinesOnlyAndFlushesTheTail) {
  char path[] = "/tmp/lf-relay-XXXXXX";
  int fd = ::mkstemp(path);
  {
    LineRelay relay("[rank 7] ", fd, nullptr);
    relay.feed("hel");
    relay.feed("lo\nwor");
    relay.feed("ld\n\nlast");
    relay.finish();
  }
  ASSERT_TRUE(drain_console(std::chrono::seconds(5)));  // the console is written by a thread of its own
  ::close(fd);
  std::ifstream in(path);
  std::string all((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(all, "[rank 7] hello\n[rank 7] world\n[rank 7] \n[rank 7] last\n");
  ::unlink(path);
}

TEST(WorkerEnv, TorchrunVariablesFromTheLayout) {
  WorkerEnvContext ctx;
  ctx.layout.node_rank = 1;
  ctx.layout.nnodes = 2;
  ctx.layout.rank_base = 4;
  ctx.layout.world_size = 8;
  ctx.layout.nproc = 4;
  ctx.layout.generation = 2;
  ctx.layout.max_restarts = 3;
  ctx.layout.worker_master_port = 1234;
  ctx.master_addr = "10.1.1.1";
  ctx.run_id = "job";
  auto env = worker_environment({{"OMP_NUM_THREADS", "8"}, {"NCCL_DEBUG", "INFO"}}, ctx, 3);
  EXPECT_EQ(env["RANK"], "7");
  EXPECT_EQ(env["LOCAL_RANK"], "3");
  EXPECT_EQ(env["GROUP_RANK"], "1");
  EXPECT_EQ(env["MASTER_ADDR"], "10.1.1.1");
  EXPECT_EQ(env["MASTER_PORT"], "1234");
  EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "2");
  EXPECT_EQ(env["OMP_NUM_THREADS"], "8");  // the user's choice stands
  EXPECT_EQ(env["NCCL_DEBUG"], "INFO");
}

TEST(WorkerProcess, ResolvesCommandsLikeExecvp) {
  EXPECT_EQ(resolve_executable("sh", "/nonexistent:/bin:/usr/bin"), "/bin/sh");
  EXPECT_THROW(resolve_executable("no-such-cmd-xyz", "/bin:/usr/bin"), lf::ConfigError);
  char path[] = "/tmp/lf-noexec-XXXXXX";
  int fd = ::mkstemp(path);  // mode 0600: not executable, even for root
  ::close(fd);
  EXPECT_THROW(resolve_executable(path, "/bin"), lf::ConfigError);
  ::unlink(path);
}

// ---- worker heartbeats: WorkerWatch on a driven clock, WorkerGroup on real processes ----

namespace {

using WatchClock = lf::agent::WorkerWatch::Clock;

std::chrono::milliseconds ms(int64_t n) { return std::chrono::milliseconds(n); }

}  // namespace

TEST(WorkerWatch, AWorkerThatNeverWritesIsNeverHung) {
  lf::agent::WorkerWatch w(10);
  const auto t0 = WatchClock::now();
  EXPECT_FALSE(w.overdue(t0 + std::chrono::hours(5)));
  EXPECT_FALSE(w.status(t0).heard);
}

TEST(WorkerWatch, PlainTextIsLivenessHeldToTheTimeout) {
  lf::agent::WorkerWatch w(10);
  const auto t0 = WatchClock::now();
  w.feed("step 1\n", t0);
  EXPECT_FALSE(w.overdue(t0 + ms(9000)));
  w.feed("st", t0 + ms(9000));  // any byte counts, a whole line or not
  EXPECT_FALSE(w.overdue(t0 + ms(18000)));
  const auto why = w.overdue(t0 + ms(19500));
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("no heartbeat for 10.5 s"), std::string::npos) << *why;
  EXPECT_NE(why->find("never sent a progress beat"), std::string::npos) << *why;
  EXPECT_FALSE(w.status(t0).progress);
  lf::agent::WorkerWatch off(0);  // liveness off
  off.feed("x\n", t0);
  EXPECT_FALSE(off.overdue(t0 + std::chrono::hours(1)));
}

TEST(WorkerWatch, AProgressDeadlinePassedWhileAliveIsAHangNamingPhaseAndStep) {
  lf::agent::WorkerWatch w(30);
  const auto t0 = WatchClock::now();
  // Split anywhere: lines are reassembled.
  const auto line = lf::progress_line(lf::WorkerPhase::kTraining, 7, 3, R"({"loss":2.25})");
  w.feed(std::string_view(line).substr(0, 10), t0);
  w.feed(std::string_view(line).substr(10), t0);
  for (int i = 1; i <= 5; ++i) w.feed(lf::alive_line(), t0 + ms(i * 1000));
  EXPECT_FALSE(w.overdue(t0 + ms(2900)));
  const auto why = w.overdue(t0 + ms(5200));
  ASSERT_TRUE(why);
  for (const char* want : {"no progress for 5.2 s", "3.0 s it promised", "phase training, step 7",
                           "last heartbeat 0.2 s ago", "collective"})
    EXPECT_NE(why->find(want), std::string::npos) << want << " in " << *why;
  const auto s = w.status(t0 + ms(5200));
  EXPECT_TRUE(s.progress);
  EXPECT_EQ(s.step, 7);
  EXPECT_EQ(s.phase, lf::WorkerPhase::kTraining);
  EXPECT_EQ(s.metrics_json, R"({"loss":2.25})");
  EXPECT_NEAR(s.since_beat_s, 0.2, 1e-9);
}

TEST(WorkerWatch, SilenceAfterProgressNamesTheLastPhaseAndStep) {
  lf::agent::WorkerWatch w(10);
  const auto t0 = WatchClock::now();
  w.feed(lf::progress_line(lf::WorkerPhase::kSaving, 40, 1800, "{}"), t0);
  const auto why = w.overdue(t0 + ms(11000));
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("no heartbeat for 11.0 s"), std::string::npos) << *why;
  EXPECT_NE(why->find("phase saving, step 40, 11.0 s ago"), std::string::npos) << *why;
}

TEST(WorkerWatch, NoDeadlineMeansNoProgressCheckAndANewBeatReplacesTheOld) {
  lf::agent::WorkerWatch w(0);
  const auto t0 = WatchClock::now();
  w.feed(lf::progress_line(lf::WorkerPhase::kTraining, 1, 1, "{}"), t0);
  w.feed(lf::progress_line(lf::WorkerPhase::kDone, 9, 0, "{}"), t0 + ms(500));
  EXPECT_FALSE(w.overdue(t0 + std::chrono::hours(1)));
  EXPECT_EQ(w.status(t0).step, 9);
}

TEST(WorkerWatch, AMalformedProgressLineIsLivenessAndItsProblemIsToldOnce) {
  lf::agent::WorkerWatch w(10);
  const auto t0 = WatchClock::now();
  w.feed("{\"kind\":\"progress\",\"phase\":\"napping\"}\n{\"kind\":\"progress\"}\n", t0);
  EXPECT_FALSE(w.status(t0).progress);
  auto p = w.take_problem();
  ASSERT_TRUE(p);
  EXPECT_NE(p->find("unknown phase 'napping'"), std::string::npos) << *p;
  EXPECT_FALSE(w.take_problem());
  // A runaway line is skipped to its end; the next line is read again.
  w.feed(std::string(lf::kMaxHeartbeatLine + 10, '{'), t0);
  w.feed("\n" + lf::progress_line(lf::WorkerPhase::kTraining, 3, 5, "{}"), t0);
  EXPECT_TRUE(w.status(t0).progress);
  EXPECT_EQ(w.status(t0).step, 3);
}

namespace {

struct Hang {
  pid_t pid = -1;
  int global_rank = -1;
  std::string why;
};

// One worker running `script` under sh with the heartbeat socket on fd 3; returns its first
// hang report (or an empty one after `limit`).
Hang run_until_hang(const std::string& script, double liveness_s, const std::function<void(pid_t)>& after_start,
                    std::chrono::seconds limit = std::chrono::seconds(30)) {
  boost::asio::io_context io;
  lf::agent::WorkerGroupOptions o;
  o.console = false;
  o.stop_grace_s = 1;
  o.liveness_timeout_s = liveness_s;
  lf::agent::WorkerGroup group(io, o);
  lf::agent::SpawnSpec spec;
  spec.argv = {"/bin/sh", "-c", script};
  spec.env = {{"PATH", "/usr/bin:/bin"}};
  Hang hang;
  group.start({spec}, {5}, "", [](const lf::agent::WorkerExit&) {},
              [&](int, int global, pid_t pid, const std::string& why) {
                hang = {pid, global, why};
                io.stop();
              });
  if (after_start) after_start(group.pids().at(0));
  boost::asio::steady_timer guard(io, limit);
  guard.async_wait([&](boost::system::error_code) { io.stop(); });
  io.run();
  const pid_t pid = group.pids().at(0);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return hang;
}

}  // namespace

TEST(WorkerGroupHeartbeat, AWorkerStuckPastItsProgressDeadlineIsReportedWithItsPid) {
  const auto line = lf::progress_line(lf::WorkerPhase::kTraining, 12, 0.5, R"({"loss":3})");
  const std::string script = "printf '%s' '" + line + "' >&3; while :; do echo alive >&3; sleep 0.1; done";
  const auto hang = run_until_hang(script, 30, nullptr);
  ASSERT_GT(hang.pid, 0) << "no hang reported";
  EXPECT_EQ(hang.global_rank, 5);
  EXPECT_NE(hang.why.find("no progress for"), std::string::npos) << hang.why;
  EXPECT_NE(hang.why.find("phase training, step 12"), std::string::npos) << hang.why;
}

TEST(WorkerGroupHeartbeat, AStoppedWorkerIsReportedAsSilentAndStopped) {
  const std::string script = "while :; do echo alive >&3; sleep 0.1; done";
  const auto hang = run_until_hang(script, 1, [](pid_t pid) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // it beats first
    ::kill(pid, SIGSTOP);
  });
  ASSERT_GT(hang.pid, 0) << "no hang reported";
  EXPECT_NE(hang.why.find("no heartbeat for"), std::string::npos) << hang.why;
  EXPECT_NE(hang.why.find("process state T (stopped)"), std::string::npos) << hang.why;
}

TEST(WorkerGroupHeartbeat, AWorkerThatNeverHeartbeatsIsNeverReported) {
  const auto hang = run_until_hang("sleep 5", 0.5, nullptr, std::chrono::seconds(3));
  EXPECT_EQ(hang.pid, -1) << hang.why;
}

// A stopped rank and a rank waiting for it in a collective miss the same step deadline (with
// liveness off): the stopped one is reported first, since the agent acts on the first report.
TEST(WorkerGroupHeartbeat, WhenSeveralAreOverdueTheStoppedOneIsReportedFirst) {
  boost::asio::io_context io;
  lf::agent::WorkerGroupOptions o;
  o.console = false;
  o.liveness_timeout_s = 0;
  lf::agent::WorkerGroup group(io, o);
  const auto line = lf::progress_line(lf::WorkerPhase::kTraining, 3, 1.5, "{}");
  lf::agent::SpawnSpec spec;
  spec.argv = {"/bin/sh", "-c", "printf '%s' '" + line + "' >&3; while :; do echo alive >&3; sleep 0.1; done"};
  spec.env = {{"PATH", "/usr/bin:/bin"}};
  std::vector<int> reported;
  group.start({spec, spec}, {0, 1}, "", [](const lf::agent::WorkerExit&) {},
              [&](int, int global, pid_t, const std::string&) { reported.push_back(global); });
  const auto pids = group.pids();
  // Both beats are read by 500 ms; then rank 1 stops and the io thread is held past the deadline,
  // so that both are overdue at the same check (not one 250 ms tick before the other).
  boost::asio::steady_timer stop_one(io, std::chrono::milliseconds(500));
  stop_one.async_wait([&](boost::system::error_code) {
    ::kill(pids[1], SIGSTOP);
    std::this_thread::sleep_for(std::chrono::seconds(2));
  });
  boost::asio::steady_timer guard(io, std::chrono::seconds(5));
  guard.async_wait([&](boost::system::error_code) { io.stop(); });
  io.run();
  for (pid_t pid : pids) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  ASSERT_EQ(reported.size(), 2u);
  EXPECT_EQ(reported[0], 1);
}

// Issue 35: what a node tells node 0's live page of a real worker: its exit (code), its lines
// (stdout and stderr, the last one), global rank 0's progress beats step by step, and why the
// node has no GPUs.
TEST(NodeStatus, AWorkersExitLinesAndStepsAsTheAgentSendsThem) {
  boost::asio::io_context io;
  WorkerGroupOptions o;
  o.console = false;
  o.liveness_timeout_s = 0;
  WorkerGroup group(io, o);
  const auto beat1 = lf::progress_line(lf::WorkerPhase::kTraining, 1, 0, R"({"loss":2.5})");
  const auto beat2 = lf::progress_line(lf::WorkerPhase::kTraining, 2, 0, R"({"loss":2.25})");
  SpawnSpec spec;
  spec.argv = {"/bin/sh", "-c", "printf '%s%s' '" + beat1 + "' '" + beat2 + "' >&3; echo hello; echo oops >&2; exit 3"};
  spec.env = {{"PATH", "/usr/bin:/bin"}};
  boost::asio::signal_set children(io, SIGCHLD);
  std::function<void()> reap = [&] {
    children.async_wait([&](boost::system::error_code ec, int) {
      if (ec) return;
      group.reap();
      reap();
    });
  };
  reap();
  std::optional<WorkerExit> exited;
  group.start({spec}, {0}, "", [&](const WorkerExit& e) {
    exited = e;
    io.stop();
  }, [](int, int, pid_t, const std::string&) {});
  boost::asio::steady_timer guard(io, std::chrono::seconds(20));
  guard.async_wait([&](boost::system::error_code) { io.stop(); });
  io.run();
  ASSERT_TRUE(exited);
  const auto s = node_status(&group, 4, {}, "libnvidia-ml.so.1 not found", {});
  EXPECT_EQ(s.generation, 4);
  EXPECT_EQ(s.gpu_note, "libnvidia-ml.so.1 not found");
  ASSERT_EQ(s.ranks.size(), 1u);
  EXPECT_TRUE(s.ranks[0].exited);
  EXPECT_FALSE(s.ranks[0].alive);
  EXPECT_EQ(s.ranks[0].exit_code, 3);
  EXPECT_EQ(s.ranks[0].step, 2);
  EXPECT_EQ(s.ranks[0].gpu, -1);
  ASSERT_EQ(s.lines.size(), 2u);
  EXPECT_FALSE(s.lines[0].err);
  EXPECT_EQ(s.lines[0].text, "hello");
  EXPECT_TRUE(s.lines[1].err);
  EXPECT_EQ(s.lines[1].text, "oops");
  ASSERT_EQ(s.points.size(), 2u);
  EXPECT_EQ(s.points[1].step, 2);
  EXPECT_EQ(s.points[1].metrics_json, R"({"loss":2.25})");
  // Taken once: the next status carries only what is new.
  const auto again = node_status(&group, 4, {}, "", {});
  EXPECT_TRUE(again.lines.empty());
  EXPECT_TRUE(again.points.empty());
  EXPECT_EQ(again.ranks[0].last_line == "hello" || again.ranks[0].last_line == "oops", true);
}
