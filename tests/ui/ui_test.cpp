// The live page's server side (issue 35): its assets are compiled in and self-contained; it serves
// read-only and needs its token beyond loopback; the live source turns the rendezvous server's
// record of real agents' statuses (raw peers speaking protocol 4) into the page's state; the
// offline source reads a run's output_dir; curves and job-wide health. The page in a real browser:
// tests/ui/test_page_browser.py.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "../../src/ui/curves.h"
#include "../../src/ui/job_health.h"
#include "lf/common/error.h"
#include "lf/common/heartbeat_line.h"
#include "lf/rendezvous/server.h"
#include "lf/ui/job_page.h"
#include "lf/ui/live_source.h"
#include "lf/ui/offline_source.h"
#include "lf/ui/page_assets.h"
#include "rdzv_raw_peer.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using lf::rdzv::test::RawPeer;

namespace {

struct Reply {
  int status = 0;
  std::string headers, body;
};

// One blocking HTTP/1.1 request to 127.0.0.1:port (Connection: close), the answer read to its end.
Reply http(uint16_t port, const std::string& method, const std::string& target, const std::string& extra = "") {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) throw std::runtime_error("connect failed");
  const std::string req = method + " " + target + " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n" + extra + "\r\n";
  (void)!::write(fd, req.data(), req.size());
  std::string all;
  char buf[8192];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) all.append(buf, static_cast<size_t>(n));
  ::close(fd);
  Reply r;
  const auto sp = all.find(' ');
  if (sp != std::string::npos) r.status = std::stoi(all.substr(sp + 1, 3));
  const auto end = all.find("\r\n\r\n");
  r.headers = all.substr(0, end);
  if (end != std::string::npos) r.body = all.substr(end + 4);
  return r;
}

// A run's output_dir as lf-train (and LLaMA-Factory) leave it.
fs::path write_run(const std::string& name, bool finished) {
  const fs::path dir = fs::temp_directory_path() / ("lf_ui_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  json history = json::array();
  history.push_back({{"epoch", 0.33}, {"grad_norm", 1.5}, {"learning_rate", 1e-4}, {"loss", 2.0}, {"step", 1}});
  history.push_back({{"epoch", 0.66}, {"grad_norm", 1.2}, {"learning_rate", 5e-5}, {"loss", 1.5}, {"step", 2}});
  history.push_back({{"epoch", 0.66}, {"eval_loss", 1.7}, {"eval_runtime", 0.1}, {"step", 2}});
  history.push_back({{"epoch", 1.0}, {"grad_norm", 0.9}, {"learning_rate", 0.0}, {"loss", 1.2}, {"step", 3}});
  if (finished) history.push_back({{"epoch", 1.0}, {"step", 3}, {"train_loss", 1.56}, {"train_runtime", 2.5}});
  std::ofstream(dir / "trainer_state.json") << json{{"global_step", 3}, {"max_steps", 3}, {"log_history", history}};
  if (finished) std::ofstream(dir / "all_results.json") << json{{"train_loss", 1.56}, {"epoch", 1.0}};
  return dir;
}

// A JobPage on its own io thread.
class PageOnThread {
 public:
  PageOnThread(lf::ui::PageOptions o, std::unique_ptr<lf::ui::PageSource> source)
      : page_(io_, std::move(o), std::move(source)) {
    page_.start();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~PageOnThread() {
    boost::asio::post(io_, [this] { page_.stop(); });
    io_.stop();
    thread_.join();
  }
  lf::ui::JobPage& page() { return page_; }
  boost::asio::io_context& io() { return io_; }

 private:
  boost::asio::io_context io_;
  lf::ui::JobPage page_;
  std::thread thread_;
};

}  // namespace

TEST(PageAssets, SmallAndSelfContained) {
  const auto* index = lf::ui::find_page_asset("/");
  ASSERT_NE(index, nullptr);
  EXPECT_NE(index->body.find("<script src=\"app.js\""), std::string_view::npos);
  EXPECT_EQ(index->content_type, "text/html; charset=utf-8");
  for (const char* path : {"/app.js", "/style.css"}) EXPECT_NE(lf::ui::find_page_asset(path), nullptr) << path;
  EXPECT_EQ(lf::ui::find_page_asset("/missing.js"), nullptr);
  // Nothing is fetched from another host (clusters are offline): no absolute src/href, no CSS url()/@import.
  const std::regex external(R"((src|href)\s*=\s*["'](https?:)?//|url\(|@import)");
  for (const char* path : {"/", "/app.js", "/style.css"}) {
    const std::string body(lf::ui::find_page_asset(path)->body);
    EXPECT_FALSE(std::regex_search(body, external)) << path;
  }
  EXPECT_LT(lf::ui::page_assets_size(), 64u * 1024) << "the page's files grew past 64 KiB";
}

TEST(JobPage, ServesReadOnlyAndTheJobsDataOnlyWithItsToken) {
  const auto dir = write_run("token", true);
  lf::ui::PageOptions o;
  o.token = "0123abcd";
  PageOnThread p(o, lf::ui::make_offline_source({dir.string(), "", nullptr}));
  const uint16_t port = p.page().port();
  EXPECT_EQ(http(port, "GET", "/").status, 200);  // the page's files: nothing of the job
  EXPECT_EQ(http(port, "GET", "/app.js").status, 200);
  const auto denied = http(port, "GET", "/api/state");
  EXPECT_EQ(denied.status, 401);
  EXPECT_NE(denied.body.find("needs its token"), std::string::npos) << denied.body;
  EXPECT_EQ(http(port, "GET", "/api/state?token=wrong").status, 401);
  const auto ok = http(port, "GET", "/api/state?token=0123abcd");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(json::parse(ok.body)["progress"]["step"], 3);
  EXPECT_EQ(http(port, "GET", "/api/preview", "Authorization: Bearer 0123abcd\r\n").status, 200);
  EXPECT_EQ(http(port, "POST", "/api/state?token=0123abcd").status, 405);
  EXPECT_EQ(http(port, "DELETE", "/").status, 405);
  EXPECT_EQ(http(port, "GET", "/api/logs?rank=x&token=0123abcd").status, 400);
  EXPECT_EQ(http(port, "GET", "/nothing?token=0123abcd").status, 404);
  EXPECT_NE(ok.headers.find("Content-Security-Policy"), std::string::npos);
  fs::remove_all(dir);
}

TEST(JobPage, BoundBeyondLoopbackItMakesAToken) {
  const auto dir = write_run("wide", true);
  lf::ui::PageOptions o;
  o.bind_host = "0.0.0.0";
  PageOnThread p(o, lf::ui::make_offline_source({dir.string(), "", nullptr}));
  EXPECT_EQ(p.page().token().size(), 32u);
  EXPECT_NE(p.page().url().find("?token=" + p.page().token()), std::string::npos) << p.page().url();
  EXPECT_EQ(http(p.page().port(), "GET", "/api/state").status, 401);
  EXPECT_EQ(http(p.page().port(), "GET", "/api/state?token=" + p.page().token()).status, 200);
  lf::ui::PageOptions local;
  PageOnThread q(local, lf::ui::make_offline_source({dir.string(), "", nullptr}));
  EXPECT_TRUE(q.page().token().empty());
  EXPECT_EQ(http(q.page().port(), "GET", "/api/state").status, 200);
  fs::remove_all(dir);
}

TEST(JobPage, LingersUntilTheOpenPagePolledOnceMore) {
  const auto dir = write_run("linger", true);
  lf::ui::PageOptions o;
  o.linger_s = 30;
  PageOnThread p(o, lf::ui::make_offline_source({dir.string(), "", nullptr}));
  auto linger = [&] {
    std::promise<bool> started;
    auto done = std::make_shared<std::promise<void>>();
    auto finished = done->get_future();
    boost::asio::post(p.io(), [&, done] { started.set_value(p.page().linger([done] { done->set_value(); })); });
    return std::make_pair(started.get_future().get(), std::move(finished));
  };
  EXPECT_FALSE(linger().first) << "no page polled: nobody would come back";
  ASSERT_EQ(http(p.page().port(), "GET", "/api/state").status, 200);
  auto [lingering, finished] = linger();
  ASSERT_TRUE(lingering);
  EXPECT_EQ(finished.wait_for(300ms), std::future_status::timeout);
  EXPECT_EQ(http(p.page().port(), "GET", "/api/state").status, 200);  // the page's last poll
  EXPECT_EQ(finished.wait_for(5s), std::future_status::ready);
  fs::remove_all(dir);
}

TEST(OfflineSource, CurvesAndProgressFromTrainerState) {
  const auto dir = write_run("state", true);
  auto src = lf::ui::make_offline_source({dir.string(), "", nullptr});
  const json s = json::parse(src->state_json());
  EXPECT_EQ(s["mode"], "finished");
  EXPECT_EQ(s["job"]["phase"], "finished");
  EXPECT_EQ(s["curves"]["loss"], json::parse("[[1,2.0],[2,1.5],[3,1.2]]"));
  EXPECT_EQ(s["curves"]["grad_norm"], json::parse("[[1,1.5],[2,1.2],[3,0.9]]"));
  EXPECT_EQ(s["curves"]["eval_loss"], json::parse("[[2,1.7]]"));
  EXPECT_EQ(s["curves"]["lr"].size(), 3u);
  EXPECT_EQ(s["progress"]["step"], 3);
  EXPECT_EQ(s["progress"]["total_steps"], 3);
  EXPECT_DOUBLE_EQ(s["progress"]["loss"].get<double>(), 1.2);
  EXPECT_DOUBLE_EQ(s["progress"]["eval_loss"].get<double>(), 1.7);
  EXPECT_EQ(s["nodes"].size(), 0u);
  EXPECT_EQ(json::parse(src->preview_json())["state"], "none");
  fs::remove_all(dir);
}

TEST(OfflineSource, TrainerLogAloneAndTheRunsLogs) {
  const fs::path dir = fs::temp_directory_path() / ("lf_ui_test_log_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "logs" / "job" / "attempt_0" / "1");
  fs::create_directories(dir / "logs" / "job" / "attempt_1" / "0");
  std::ofstream(dir / "trainer_log.jsonl")
      << R"({"current_steps": 5, "total_steps": 10, "loss": 3.5, "lr": 0.001, "epoch": 0.5, "throughput": 900.5})" "\n"
      << R"({"current_steps": 10, "total_steps": 10, "eval_loss": 3.0, "epoch": 1.0})" "\n";
  std::ofstream(dir / "logs" / "job" / "attempt_0" / "1" / "stdout.log") << "old attempt\n";
  std::ofstream(dir / "logs" / "job" / "attempt_1" / "0" / "stdout.log") << "a\nb\n";
  std::ofstream(dir / "logs" / "job" / "attempt_1" / "0" / "stderr.log") << "warning: x\n";
  auto src = lf::ui::make_offline_source({dir.string(), (dir / "logs").string(), nullptr});
  const json s = json::parse(src->state_json());
  EXPECT_EQ(s["job"]["phase"], "unfinished");
  EXPECT_EQ(s["curves"]["loss"], json::parse("[[5,3.5]]"));
  EXPECT_EQ(s["curves"]["eval_loss"], json::parse("[[10,3.0]]"));
  EXPECT_EQ(s["progress"]["step"], 10);
  EXPECT_DOUBLE_EQ(s["progress"]["tokens_per_s"].get<double>(), 900.5);
  EXPECT_EQ(s["log_ranks"], json::parse("[0]")) << "the latest attempt's ranks";
  const json logs = json::parse(src->logs_json(0));
  ASSERT_EQ(logs["lines"].size(), 3u);
  EXPECT_EQ(logs["lines"][1]["text"], "b");
  EXPECT_EQ(logs["lines"][2]["err"], true);
  fs::remove_all(dir);
  fs::create_directories(dir);
  try {
    lf::ui::make_offline_source({dir.string(), "", nullptr});
    FAIL() << "an empty folder was taken for a run";
  } catch (const lf::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("neither trainer_state.json nor trainer_log.jsonl"), std::string::npos);
  }
  fs::remove_all(dir);
}

TEST(Curves, ARestartResumingBelowDropsTheFailedRunsPoints) {
  lf::ui::Curves c;
  lf::ProgressMetrics m;
  for (int s = 1; s <= 6; ++s) {
    m.loss = 10.0 - s;
    c.add(s, m);
  }
  m.loss = 42;
  c.add(4, m);  // resumed from checkpoint-3: step 4 again
  ASSERT_EQ(c.loss().size(), 4u);
  EXPECT_EQ(c.loss().back(), std::make_pair(int64_t{4}, 42.0));
}

TEST(Curves, FollowsTheRecordAndThinsToTheBoundKeepingTheLast) {
  std::vector<lf::rdzv::StepPoint> points;
  lf::ui::Curves c;
  for (int s = 1; s <= 2500; ++s) points.push_back({s, "training", "{\"loss\":" + std::to_string(s) + ",\"step_s\":0.5}"});
  c.follow(points);
  points.push_back({2500, "saving", R"({"loss":2500,"eval_loss":7})"});  // the record replaced its last point
  points.erase(points.end() - 2);
  c.follow(points);
  const json j = c.to_json(600);
  EXPECT_LE(j["loss"].size(), 601u);
  EXPECT_EQ(j["loss"].back(), json::parse("[2500, 2500.0]"));
  EXPECT_EQ(j["eval_loss"], json::parse("[[2500, 7.0]]"));
  EXPECT_DOUBLE_EQ(*c.recent_step_seconds(), 0.5);
}

namespace {

// Two members of a job on a real server, joined and laid out.
class LiveJob : public ::testing::Test {
 protected:
  void SetUp() override {
    lf::rdzv::ServerOptions o;
    o.job_id = "job";
    o.version = "v";
    o.min_nodes = o.max_nodes = 2;
    o.heartbeat_interval_s = 0.2;
    o.heartbeat_timeout_s = 60;
    o.node_status_interval_s = 1;
    server_ = std::make_unique<lf::rdzv::RendezvousServer>(io_, o);
    server_->start([](int, const std::string&) {});
    lf::ui::LiveSourceOptions lo;
    lo.facts = {{"model", "tiny"}};
    source_ = lf::ui::make_live_source(*server_, std::move(lo));
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    io_.stop();
    thread_.join();
  }
  lf::rdzv::JoinMsg join(int64_t rank) {
    lf::rdzv::JoinMsg j;
    j.job_id = "job";
    j.node_rank = rank;
    j.hostname = "host" + std::to_string(rank);
    j.version = "v";
    j.pid = 100 + rank;
    j.min_nodes = j.max_nodes = 2;
    return j;
  }
  // The page's state, built on the server's thread as the page builds it.
  json state() {
    std::promise<std::string> p;
    boost::asio::post(io_, [&] { p.set_value(source_->state_json()); });
    return json::parse(p.get_future().get());
  }
  json logs(int64_t rank) {
    std::promise<std::string> p;
    boost::asio::post(io_, [&] { p.set_value(source_->logs_json(rank)); });
    return json::parse(p.get_future().get());
  }

  boost::asio::io_context io_;
  std::unique_ptr<lf::rdzv::RendezvousServer> server_;
  std::unique_ptr<lf::ui::PageSource> source_;
  std::thread thread_;
};

lf::rdzv::RankStatus rank_status(int64_t rank, int64_t step, const std::string& metrics) {
  lf::rdzv::RankStatus r;
  r.rank = rank;
  r.pid = 1000 + rank;
  r.alive = r.heard = r.progress = true;
  r.phase = "training";
  r.step = step;
  r.metrics_json = metrics;
  r.last_line = "step " + std::to_string(step);
  return r;
}

}  // namespace

TEST_F(LiveJob, EveryNodesStatusFailureAndLinesReachThePage) {
  RawPeer a(server_->port()), b(server_->port());
  a.send(join(0));
  b.send(join(1));
  const auto la = a.expect<lf::rdzv::LayoutMsg>(), lb = b.expect<lf::rdzv::LayoutMsg>();
  ASSERT_TRUE(la && lb);
  EXPECT_EQ(la->status_interval_ms, 1000) << "the layout asks the nodes for their status";
  lf::rdzv::NodeStatusMsg s0;
  s0.ranks = {rank_status(0, 7, R"({"loss":2.5,"learning_rate":0.001,"grad_norm":1.1,"total_steps":20,"tokens_per_s":100,"step_s":0.5})")};
  s0.gpu_note = "libnvidia-ml.so.1 not found";
  for (int s = 1; s <= 7; ++s)
    s0.points.push_back({s, "training", "{\"loss\":" + std::to_string(3.0 - 0.1 * s) + ",\"step_s\":0.5}"});
  s0.lines = {{0, false, "loading the model"}, {0, true, "a warning"}};
  a.send(s0);
  lf::rdzv::NodeStatusMsg s1;
  auto r1 = rank_status(1, 7, R"({"tokens_per_s":50})");
  s1.ranks = {r1};
  lf::rdzv::GpuStatus g;
  g.index = 0;
  g.name = "NVIDIA H200";
  g.uuid = "GPU-x";
  g.utilization = 0.9;
  g.memory_used_bytes = 1e10;
  g.memory_total_bytes = 1.4e11;
  g.temperature_celsius = 50;
  s1.gpus = {g};
  b.send(s1);
  // Node 1's worker is killed: its status shows the exit, then the failure follows (as the agent sends them).
  r1.alive = false;
  r1.exited = true;
  r1.signal = 9;
  s1.ranks = {r1};
  b.send(s1);
  lf::rdzv::FailureMsg f;
  f.node_rank = 1;
  f.global_rank = 1;
  f.signal = 9;
  f.message = "killed by signal 9 (Killed)";
  b.send(f);
  ASSERT_TRUE(a.expect<lf::rdzv::AbortMsg>());
  json s;
  for (int i = 0; i < 50; ++i) {  // the server reads the frames on its own thread
    s = state();
    if (!s["failures"].empty()) break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_EQ(s["nodes"].size(), 2u) << s.dump(1);
  EXPECT_EQ(s["nodes"][0]["hostname"], "host0");
  EXPECT_EQ(s["nodes"][0]["gpus"].size(), 0u);
  EXPECT_EQ(s["nodes"][0]["gpu_note"], "libnvidia-ml.so.1 not found");
  EXPECT_EQ(s["nodes"][1]["gpus"][0]["name"], "NVIDIA H200");
  const json& killed = s["nodes"][1]["ranks"][0];
  EXPECT_EQ(killed["state"], "failed");
  EXPECT_EQ(killed["exit"], "SIGKILL (signal 9)");
  EXPECT_EQ(killed["failures"], 1);
  EXPECT_EQ(s["nodes"][0]["ranks"][0]["state"], "stopping") << "the job is being stopped";
  ASSERT_EQ(s["failures"].size(), 1u);
  EXPECT_EQ(s["failures"][0]["exit"], "SIGKILL (signal 9)");
  EXPECT_EQ(s["failures"][0]["rank"], 1);
  EXPECT_EQ(s["progress"]["step"], 7);
  EXPECT_EQ(s["progress"]["total_steps"], 20);
  EXPECT_DOUBLE_EQ(s["progress"]["eta_s"].get<double>(), 13 * 0.5);
  EXPECT_EQ(s["curves"]["loss"].size(), 7u);
  EXPECT_EQ(s["job"]["facts"][0], json::parse(R"(["model", "tiny"])"));
  const json l = logs(0);
  ASSERT_EQ(l["lines"].size(), 2u);
  EXPECT_EQ(l["lines"][0]["text"], "loading the model");
  EXPECT_EQ(l["lines"][1]["err"], true);
}

// After the job ended, the page still says what ran: the world it had, no rank "stopping", and the
// last throughput the ranks reported (not "–").
TEST_F(LiveJob, AnEndedJobShowsItsWorldStoppedRanksAndLastThroughput) {
  RawPeer a(server_->port()), b(server_->port());
  a.send(join(0));
  b.send(join(1));
  ASSERT_TRUE(a.expect<lf::rdzv::LayoutMsg>() && b.expect<lf::rdzv::LayoutMsg>());
  lf::rdzv::NodeStatusMsg s0, s1;
  s0.ranks = {rank_status(0, 5, R"({"tokens_per_s":100,"mfu":0.4})")};
  auto r1 = rank_status(1, 5, R"({"tokens_per_s":50,"mfu":0.2})");
  s1.ranks = {r1};
  a.send(s0);
  b.send(s1);
  r1.alive = false;
  r1.exited = true;
  r1.exit_code = 1;
  s1.ranks = {r1};
  b.send(s1);
  lf::rdzv::FailureMsg f;
  f.node_rank = 1;
  f.global_rank = 1;
  f.exit_code = 1;
  f.message = "exited with code 1";
  b.send(f);
  ASSERT_TRUE(a.expect<lf::rdzv::AbortMsg>());
  lf::rdzv::StoppedMsg st;  // both agents report their workers stopped: the job ends
  a.send(st);
  b.send(st);
  json s;
  for (int i = 0; i < 50; ++i) {
    s = state();
    if (s["job"]["phase"] == "finished") break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_EQ(s["job"]["phase"], "finished") << s["job"].dump();
  EXPECT_EQ(s["job"]["world_size"], 2) << "the world the job ran with, not 0";
  ASSERT_EQ(s["nodes"].size(), 2u) << s.dump(1);
  EXPECT_EQ(s["nodes"][0]["ranks"][0]["state"], "stopped") << "an ended job has no rank still stopping";
  EXPECT_EQ(s["nodes"][1]["ranks"][0]["state"], "failed");
  ASSERT_TRUE(s["progress"]["tokens_per_s"].is_number()) << s["progress"].dump();
  EXPECT_DOUBLE_EQ(s["progress"]["tokens_per_s"].get<double>(), 150) << "the last figures the ranks reported";
  EXPECT_DOUBLE_EQ(s["progress"]["mfu"].get<double>(), 0.3);
}

TEST(JobHealth, AStragglerIsNamedAgainstEveryRankOfTheJob) {
  lf::rdzv::JobRecord record;
  std::vector<lf::rdzv::NodeRecord> nodes(2);
  nodes[0].node_rank = 0, nodes[0].hostname = "a";
  nodes[1].node_rank = 1, nodes[1].hostname = "b";
  record.round_formed(nodes);
  lf::metrics::HealthThresholds t;
  lf::ui::JobHealth health(t);
  const auto now = lf::metrics::HealthClock::now();
  // One rank per node (as on two 1-GPU nodes): no node alone has two ranks to compare.
  for (int step = 1; step <= 8; ++step) {
    lf::rdzv::NodeStatusMsg s0, s1;
    s0.ranks = {rank_status(0, step, R"({"step_s":1.0})")};
    s1.ranks = {rank_status(1, step, R"({"step_s":1.0})")};
    auto s2 = rank_status(2, step, R"({"step_s":3.5})");
    s2.local_rank = 1;
    s1.ranks.push_back(s2);
    record.status(0, std::move(s0), now);
    record.status(1, std::move(s1), now);
    health.check(record, now + std::chrono::seconds(step), 0);
  }
  EXPECT_EQ(health.flagged_ranks(), std::set<int64_t>{2});
  ASSERT_EQ(health.active().count("straggler:2"), 1u);
  EXPECT_NE(health.active().at("straggler:2").line.find("rank 2 on node 1 (b), no GPU"), std::string::npos)
      << health.active().at("straggler:2").line;
}
