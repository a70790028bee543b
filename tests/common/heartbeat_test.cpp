// The heartbeat wire format, the progress deadlines and LF_FAULT_SLEEP; the worker side of the
// channel over a real socketpair.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "lf/common/error.h"
#include "lf/common/fault_sleep.h"
#include "lf/common/heartbeat_line.h"
#include "lf/common/progress_deadline.h"
#include "lf/common/worker_heartbeat.h"

using lf::HeartbeatLine;
using lf::WorkerPhase;
using json = nlohmann::json;

TEST(HeartbeatLine, ProgressLinesRoundTrip) {
  const auto line = lf::progress_line(WorkerPhase::kTraining, 41, 120.5, R"({"loss":1.5,"lr":2e-5})");
  ASSERT_EQ(line.back(), '\n');
  const auto h = lf::parse_heartbeat_line(std::string_view(line).substr(0, line.size() - 1));
  EXPECT_EQ(h.kind, HeartbeatLine::Kind::kProgress);
  EXPECT_EQ(h.phase, WorkerPhase::kTraining);
  EXPECT_EQ(h.step, 41);
  EXPECT_DOUBLE_EQ(h.deadline_s, 120.5);
  EXPECT_EQ(json::parse(h.metrics_json), json::parse(R"({"loss":1.5,"lr":2e-5})"));
  EXPECT_TRUE(h.problem.empty());
  for (auto p : {WorkerPhase::kLoading, WorkerPhase::kTokenizing, WorkerPhase::kTraining, WorkerPhase::kEvaluating,
                 WorkerPhase::kSaving, WorkerPhase::kDone})
    EXPECT_EQ(lf::parse_phase(lf::phase_name(p)), p);
}

TEST(HeartbeatLine, NonFiniteMetricsAndBadMetricsTextStillMakeAValidLine) {
  const auto nan = lf::progress_line(WorkerPhase::kTraining, 3, 10, json{{"loss", std::nan("")}}.dump());
  EXPECT_EQ(lf::parse_heartbeat_line(nan.substr(0, nan.size() - 1)).kind, HeartbeatLine::Kind::kProgress);
  const auto bad = lf::progress_line(WorkerPhase::kSaving, 3, 10, "not json");
  const auto h = lf::parse_heartbeat_line(bad.substr(0, bad.size() - 1));
  EXPECT_EQ(h.kind, HeartbeatLine::Kind::kProgress);
  EXPECT_TRUE(json::parse(h.metrics_json).contains("metrics_error"));
}

TEST(HeartbeatLine, AnythingElseIsLivenessOnly) {
  // Plain text (a torchrun script's beats), other JSON, and the alive line itself.
  for (std::string_view line : {"alive", "step 1", "", "[1,2]", "{}", R"({"kind":"alive"})", "{not json",
                                R"({"kind":"progress)"}) {
    const auto h = lf::parse_heartbeat_line(line);
    EXPECT_EQ(h.kind, HeartbeatLine::Kind::kAlive) << line;
    EXPECT_TRUE(h.problem.empty()) << line;
  }
  const auto alive = lf::alive_line();
  EXPECT_EQ(lf::parse_heartbeat_line(alive.substr(0, alive.size() - 1)).kind, HeartbeatLine::Kind::kAlive);
}

TEST(HeartbeatLine, AProgressLineWithABadFieldIsLivenessAndSaysWhy) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"kind":"progress"})", "phase"},
      {R"({"kind":"progress","phase":"sleeping"})", "unknown phase 'sleeping'"},
      {R"({"kind":"progress","phase":"training","step":"4"})", "step"},
      {R"({"kind":"progress","phase":"training","deadline_s":"soon"})", "deadline_s"},
      {R"({"kind":"progress","phase":"training","metrics":[1]})", "metrics"},
  };
  for (const auto& [line, why] : cases) {
    const auto h = lf::parse_heartbeat_line(line);
    EXPECT_EQ(h.kind, HeartbeatLine::Kind::kAlive) << line;
    EXPECT_NE(h.problem.find(why), std::string::npos) << line << " -> " << h.problem;
  }
  const std::string huge = R"({"kind":"progress","phase":"training","metrics":{"x":")" +
                           std::string(lf::kMaxHeartbeatLine, 'x') + "\"}}";
  EXPECT_EQ(lf::parse_heartbeat_line(huge).kind, HeartbeatLine::Kind::kAlive);
}

TEST(StepDeadline, IsTheFloorOrAFactorOfTheMedianStep) {
  lf::StepDeadline d(10, 120);
  EXPECT_DOUBLE_EQ(d.median(), 0);
  EXPECT_DOUBLE_EQ(d.deadline_s(), 120);
  for (double s : {1.0, 2.0, 30.0}) d.add(s);  // one slow step does not move the median
  EXPECT_DOUBLE_EQ(d.median(), 2.0);
  EXPECT_DOUBLE_EQ(d.deadline_s(), 120);
  for (double s : {20.0, 20.0, 20.0}) d.add(s);
  EXPECT_DOUBLE_EQ(d.median(), 20.0);
  EXPECT_DOUBLE_EQ(d.deadline_s(), 200);
  d.add(std::nan(""));  // ignored
  d.add(-1);
  EXPECT_EQ(d.count(), 6u);
  for (size_t i = 0; i < lf::StepDeadline::kWindow; ++i) d.add(0.5);  // the window follows the run
  EXPECT_EQ(d.count(), lf::StepDeadline::kWindow);
  EXPECT_DOUBLE_EQ(d.median(), 0.5);
}

namespace {

struct Beat {
  WorkerPhase phase;
  int64_t step;
  double deadline_s;
  json metrics;
};

lf::ProgressReporter recording(std::vector<Beat>& beats, lf::ProgressDeadlines d = {},
                               std::vector<lf::FaultSleep> faults = {}) {
  return lf::ProgressReporter(
      d, [&beats](WorkerPhase p, int64_t step, double deadline, const std::string& m) {
        beats.push_back({p, step, deadline, json::parse(m)});
      },
      std::move(faults));
}

}  // namespace

TEST(ProgressReporter, EachPhaseHasItsOwnDeadline) {
  lf::ProgressDeadlines d;
  d.step_factor = 10;
  d.step_floor_s = 5;
  d.first_step_s = 60;
  d.load_s = 1800;
  d.tokenize_s = 3600;
  d.eval_s = 900;
  d.save_s = 1200;
  std::vector<Beat> beats;
  auto r = recording(beats, d);
  r.loading();
  r.tokenizing();
  r.training_begins(0);
  r.step_done(1, 2.0, {.loss = 2.5});
  r.step_done(2, 2.0, {.loss = 2.0});
  r.evaluating(2);
  r.note(&lf::ProgressMetrics::eval_loss, 1.75);
  r.saving(2);
  r.done();
  ASSERT_EQ(beats.size(), 8u);
  const std::vector<std::pair<WorkerPhase, double>> want = {
      {WorkerPhase::kLoading, 1800}, {WorkerPhase::kTokenizing, 3600}, {WorkerPhase::kTraining, 60},
      {WorkerPhase::kTraining, 20},  {WorkerPhase::kTraining, 20},     {WorkerPhase::kEvaluating, 900},
      {WorkerPhase::kSaving, 1200},  {WorkerPhase::kDone, 0}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(beats[i].phase, want[i].first) << i;
    EXPECT_DOUBLE_EQ(beats[i].deadline_s, want[i].second) << i;
  }
  // Steps and metrics: the last step's metrics (with its time) ride on every later beat.
  EXPECT_EQ(beats[4].step, 2);
  EXPECT_DOUBLE_EQ(beats[4].metrics["loss"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(beats[4].metrics["step_s"].get<double>(), 2.0);
  EXPECT_EQ(beats[6].step, 2);
  EXPECT_DOUBLE_EQ(beats[6].metrics["loss"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(beats[6].metrics["eval_loss"].get<double>(), 1.75);
  EXPECT_FALSE(beats[5].metrics.contains("eval_loss"));
  EXPECT_EQ(beats[7].step, 2);
}

TEST(ProgressReporter, AResumedRunStartsAtItsStepAndOffMeansNoDeadlines) {
  std::vector<Beat> beats;
  lf::ProgressDeadlines off;
  off.enabled = false;
  auto r = recording(beats, off);
  r.loading();
  r.training_begins(40);
  r.step_done(41, 1.0);
  for (const auto& b : beats) EXPECT_DOUBLE_EQ(b.deadline_s, 0);
  EXPECT_EQ(beats[1].step, 40);
  EXPECT_EQ(beats[2].step, 41);
}

TEST(ProgressReporter, AFaultSleepSleepsOnceAfterThePhasesBeat) {
  std::vector<Beat> beats;
  auto r = recording(beats, {}, {{WorkerPhase::kSaving, 0.5, -1}});
  const auto t0 = std::chrono::steady_clock::now();
  r.saving(3);
  const auto slept = std::chrono::steady_clock::now() - t0;
  ASSERT_EQ(beats.size(), 1u);  // the beat went out first: the agent holds the saving deadline
  EXPECT_GE(slept, std::chrono::milliseconds(500));
  const auto t1 = std::chrono::steady_clock::now();
  r.saving(4);
  r.loading();
  // Once, and that phase only: a second sleep would take 500 ms more.
  EXPECT_LT(std::chrono::steady_clock::now() - t1, std::chrono::milliseconds(450));
}

TEST(FaultSleep, ParsesEntriesAndRefusesBadOnesSayingTheForm) {
  const auto f = lf::parse_fault_sleep("saving:30@0,loading:2.5");
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].phase, WorkerPhase::kSaving);
  EXPECT_DOUBLE_EQ(f[0].seconds, 30);
  EXPECT_EQ(f[0].rank, 0);
  EXPECT_EQ(f[1].phase, WorkerPhase::kLoading);
  EXPECT_EQ(f[1].rank, -1);
  for (const char* bad : {"saving", "napping:3", "done:3", "saving:x", "saving:-1", "saving:3@", "saving:3@-2"}) {
    try {
      lf::parse_fault_sleep(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const lf::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("PHASE:SECONDS"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("LF_FAULT_SLEEP"), std::string::npos) << e.what();
    }
  }
  setenv("LF_FAULT_SLEEP", "saving:1@1,training:2", 1);
  EXPECT_EQ(lf::fault_sleeps_from_env(0).size(), 1u);
  EXPECT_EQ(lf::fault_sleeps_from_env(1).size(), 2u);
  unsetenv("LF_FAULT_SLEEP");
}

TEST(ProgressDeadlines, KnobsFromTheEnvironmentAndBadValuesNamed) {
  setenv("LF_PROGRESS_STEP_FLOOR_S", "3", 1);
  setenv("LF_PROGRESS_SAVE_TIMEOUT_S", "0", 1);
  const auto d = lf::ProgressDeadlines::from_env();
  EXPECT_DOUBLE_EQ(d.step_floor_s, 3);
  EXPECT_DOUBLE_EQ(d.save_s, 0);
  EXPECT_DOUBLE_EQ(d.step_factor, 10);
  EXPECT_DOUBLE_EQ(d.load_s, 1800);
  setenv("LF_PROGRESS_STEP_FACTOR", "-2", 1);
  EXPECT_THROW(lf::ProgressDeadlines::from_env(), lf::ConfigError);
  setenv("LF_PROGRESS_STEP_FACTOR", "ten", 1);
  EXPECT_THROW(lf::ProgressDeadlines::from_env(), lf::ConfigError);
  unsetenv("LF_PROGRESS_STEP_FACTOR");
  setenv("LF_PROGRESS_DEADLINES", "maybe", 1);
  EXPECT_THROW(lf::ProgressDeadlines::from_env(), lf::ConfigError);
  unsetenv("LF_PROGRESS_DEADLINES");
  unsetenv("LF_PROGRESS_STEP_FLOOR_S");
  unsetenv("LF_PROGRESS_SAVE_TIMEOUT_S");
}

// The only test in this binary that touches the process's channel (LF_HEARTBEAT_FD is read once).
TEST(WorkerHeartbeat, LivenessAndProgressReachTheChannelAsWholeLines) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  setenv("LF_HEARTBEAT_FD", std::to_string(sv[1]).c_str(), 1);
  ASSERT_TRUE(lf::heartbeat_channel_open());
  lf::start_worker_liveness(0.02);
  lf::start_worker_liveness(0.02);  // once per process
  for (int i = 0; i < 50; ++i) lf::worker_progress(WorkerPhase::kTraining, i, 9, R"({"loss":1})");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::string got;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(sv[0], buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  int progress = 0, alive = 0;
  size_t start = 0;
  for (size_t nl; (nl = got.find('\n', start)) != std::string::npos; start = nl + 1) {
    const auto h = lf::parse_heartbeat_line(std::string_view(got).substr(start, nl - start));
    EXPECT_TRUE(h.problem.empty());
    if (h.kind == HeartbeatLine::Kind::kProgress) {
      EXPECT_EQ(h.step, progress);  // in order, none torn
      ++progress;
    } else {
      ++alive;
    }
  }
  EXPECT_EQ(start, got.size());
  EXPECT_EQ(progress, 50);
  EXPECT_GE(alive, 1);
  unsetenv("LF_HEARTBEAT_FD");
}

// The worker writes and the agent reads the same struct: every field survives the wire.
TEST(ProgressMetrics, EveryFieldRoundTripsAndUnknownOrNonNumbersAreDropped) {
  lf::ProgressMetrics m;
  double v = 1.5;
  for (const auto& f : lf::ProgressMetrics::kFields) m.*f.member = (v += 1);
  const auto back = lf::ProgressMetrics::parse(m.to_json());
  for (const auto& f : lf::ProgressMetrics::kFields) EXPECT_EQ(back.*f.member, m.*f.member) << f.name;
  const auto partial = lf::ProgressMetrics::parse(R"({"loss": 2, "grad_norm": "x", "other": 3})");
  EXPECT_EQ(partial.loss, 2.0);
  EXPECT_FALSE(partial.grad_norm);
  EXPECT_EQ(lf::ProgressMetrics{}.to_json(), "{}");
  lf::ProgressMetrics later;
  later.eval_loss = 0.5;
  m.merge(later);
  EXPECT_EQ(m.eval_loss, 0.5);
  EXPECT_TRUE(m.loss);
}
