// lf_metrics: the exposition format, per-rank series from heartbeat payloads, sysfs network
// counters (real loopback traffic; a sysfs tree of our own for InfiniBand, which this
// machine lacks), NVML's absence, CUDA_VISIBLE_DEVICES as CUDA parses it, the health rules
// (time driven by the test), and the HTTP endpoint over real sockets.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "lf/common/error.h"
#include "lf/metrics/exposition.h"
#include "lf/metrics/gpu_assignment.h"
#include "lf/metrics/gpu_series.h"
#include "lf/metrics/health.h"
#include "lf/metrics/metrics_server.h"
#include "lf/metrics/net_counters.h"
#include "lf/metrics/node_exporter.h"
#include "lf/metrics/nvml.h"
#include "lf/metrics/rank_series.h"

namespace lf::metrics {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

RankReport training_report(int rank, int64_t step, double loss, double step_s) {
  RankReport r;
  r.rank = rank;
  r.local_rank = rank;
  r.pid = 1000 + rank;
  r.alive = r.heard = r.progress = true;
  r.phase = "training";
  r.step = step;
  r.metrics_json = fmt::format(R"({{"loss":{},"learning_rate":2e-05,"grad_norm":0.5,"epoch":0.25,)"
                               R"("tokens_per_s":1234.5,"step_s":{},"comm_exposed_s":null}})",
                               loss, step_s);
  return r;
}

// ---- exposition ----------------------------------------------------------------------

TEST(Exposition, ValuesRoundTripAndSpecialValues) {
  for (double v : {0.1, 1.0 / 3, 2e-05, 6.931471805599453, 1e300, -0.0})
    EXPECT_EQ(std::stod(format_value(v)), v) << format_value(v);
  EXPECT_EQ(format_value(NAN), "NaN");
  EXPECT_EQ(format_value(INFINITY), "+Inf");
  EXPECT_EQ(format_value(-INFINITY), "-Inf");
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

TEST(Exposition, FamilyHelpTypeAndLabels) {
  Exposition e;
  e.family("lf_x", MetricType::kGauge, "help with \\ and\nnewline");
  e.sample({{"node", "0"}, {"rank", "1"}}, 2.5);
  e.sample({}, 3);
  EXPECT_EQ(e.text(), "# HELP lf_x help with \\\\ and\\nnewline\n# TYPE lf_x gauge\nlf_x{node=\"0\",rank=\"1\"} 2.5\n"
                      "lf_x 3\n");
}

TEST(Exposition, HistogramBucketsAreCumulative) {
  Histogram h({1, 2, 4});
  h.observe(0.5);
  h.observe(1.5, 2);
  h.observe(10);
  h.observe(NAN);  // ignored
  Exposition e;
  e.family("lf_h", MetricType::kHistogram, "h");
  h.write(e, {{"rank", "0"}});
  const std::string t = e.text();
  EXPECT_TRUE(contains(t, "lf_h_bucket{rank=\"0\",le=\"1\"} 1\n")) << t;
  EXPECT_TRUE(contains(t, "lf_h_bucket{rank=\"0\",le=\"2\"} 3\n")) << t;
  EXPECT_TRUE(contains(t, "lf_h_bucket{rank=\"0\",le=\"4\"} 3\n")) << t;
  EXPECT_TRUE(contains(t, "lf_h_bucket{rank=\"0\",le=\"+Inf\"} 4\n")) << t;
  EXPECT_TRUE(contains(t, "lf_h_sum{rank=\"0\"} 13.5\n")) << t;
  EXPECT_TRUE(contains(t, "lf_h_count{rank=\"0\"} 4\n")) << t;
}

// ---- per-rank series -------------------------------------------------------------------

TEST(RankSeries, PayloadBecomesSeriesAndEachNewStepIsObservedOnce) {
  RankSeries s;
  s.update({training_report(0, 1, 6.9, 0.3), training_report(1, 1, 6.9, 0.6)}, 1000);
  s.update({training_report(0, 1, 6.9, 0.3), training_report(1, 1, 6.9, 0.6)}, 1001);  // same step: not again
  s.update({training_report(0, 4, 5.5, 0.3), training_report(1, 2, 6.1, 0.6)}, 1002);  // rank 0 skipped 2 steps
  Exposition e;
  s.write(e, "1");
  const std::string t = e.text();
  EXPECT_TRUE(contains(t, "lf_train_step{node=\"1\",rank=\"0\",local_rank=\"0\"} 4\n")) << t;
  EXPECT_TRUE(contains(t, "lf_train_loss{node=\"1\",rank=\"0\",local_rank=\"0\"} 5.5\n")) << t;
  // What every rank shares is the job's: once, rank 0's.
  EXPECT_TRUE(contains(t, "lf_train_learning_rate{node=\"1\",rank=\"0\",local_rank=\"0\"} 2e-05\n")) << t;
  EXPECT_FALSE(contains(t, "lf_train_learning_rate{node=\"1\",rank=\"1\"")) << t;
  EXPECT_FALSE(contains(t, "lf_train_loss{node=\"1\",rank=\"1\"")) << t;
  EXPECT_TRUE(contains(t, "lf_train_tokens_per_second{node=\"1\",rank=\"0\",local_rank=\"0\"} 1234.5\n")) << t;
  EXPECT_TRUE(contains(t, "lf_train_phase{node=\"1\",rank=\"0\",local_rank=\"0\",phase=\"training\"} 1\n")) << t;
  // Step 1 was the first seen (no observation: where the run started), then 3 steps at 0.3 s.
  EXPECT_TRUE(contains(t, "lf_train_step_seconds_count{node=\"1\",rank=\"0\",local_rank=\"0\"} 3\n")) << t;
  EXPECT_TRUE(contains(t, "lf_train_step_seconds_count{node=\"1\",rank=\"1\",local_rank=\"1\"} 1\n")) << t;
  // A null (comm_exposed_s without LF_PROFILE_PHASES) and a key never sent (mfu): no family.
  EXPECT_FALSE(contains(t, "lf_train_comm_exposed_seconds")) << t;
  EXPECT_FALSE(contains(t, "lf_train_mfu")) << t;
  EXPECT_TRUE(contains(t, "lf_train_last_step_timestamp_seconds{node=\"1\",rank=\"0\",local_rank=\"0\"} 1002\n")) << t;
}

TEST(RankSeries, WorkersWithoutProgressBeatsHaveNoTrainingSeries) {
  RankSeries s;
  RankReport r;
  r.rank = 3;
  r.alive = true;
  r.heard = true;
  r.since_beat_s = 0.5;
  s.update({r}, 1);
  Exposition e;
  s.write(e, "0");
  EXPECT_FALSE(contains(e.text(), "lf_train_step")) << e.text();
  EXPECT_TRUE(contains(e.text(), "lf_worker_heartbeat_age_seconds{node=\"0\",rank=\"3\",local_rank=\"0\"} 0.5"));
}

TEST(RankSeries, MalformedPayloadGivesNoValues) {
  const auto v = lf::ProgressMetrics::parse("{not json");
  EXPECT_FALSE(v.loss);
  EXPECT_EQ(lf::ProgressMetrics::parse(R"({"loss": "1.0"})").loss, std::nullopt);  // a string is not a number
}

// ---- network -------------------------------------------------------------------------------

TEST(IfnameSpec, NcclSyntax) {
  EXPECT_TRUE(IfnameSpec::parse("eth,ens").matches("eth0"));
  EXPECT_TRUE(IfnameSpec::parse("eth,ens").matches("ens5f0"));
  EXPECT_FALSE(IfnameSpec::parse("eth").matches("ib0"));
  EXPECT_FALSE(IfnameSpec::parse("^docker,lo").matches("lo"));
  EXPECT_TRUE(IfnameSpec::parse("^docker,lo").matches("eth0"));
  EXPECT_TRUE(IfnameSpec::parse("=eth0").matches("eth0"));
  EXPECT_FALSE(IfnameSpec::parse("=eth0").matches("eth01"));
  EXPECT_FALSE(IfnameSpec::parse("^=eth0").matches("eth0"));
  EXPECT_TRUE(IfnameSpec::parse("^=eth0").matches("eth01"));
}

TEST(NetCounters, LoopbackBytesRiseWithRealTraffic) {
  const auto names = watched_interfaces(std::string("lo"));
  ASSERT_EQ(names, std::vector<std::string>{"lo"});
  const auto before = read_interfaces(names);
  ASSERT_EQ(before.size(), 1u);
  // 4 MiB through a loopback TCP connection.
  const int srv = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(srv, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ::listen(srv, 1);
  socklen_t len = sizeof(a);
  ::getsockname(srv, reinterpret_cast<sockaddr*>(&a), &len);
  std::thread sink([srv] {
    const int c = ::accept(srv, nullptr, nullptr);
    char buf[65536];
    while (::recv(c, buf, sizeof(buf), 0) > 0) {
    }
    ::close(c);
  });
  const int cli = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(::connect(cli, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  const std::string chunk(1 << 20, 'x');
  for (int i = 0; i < 4; ++i) ASSERT_EQ(::send(cli, chunk.data(), chunk.size(), 0), static_cast<ssize_t>(chunk.size()));
  ::close(cli);
  sink.join();
  ::close(srv);
  const auto after = read_interfaces(names);
  EXPECT_GE(after[0].stats.at("tx_bytes") - before[0].stats.at("tx_bytes"), 4u << 20);
  EXPECT_GE(after[0].stats.at("rx_bytes") - before[0].stats.at("rx_bytes"), 4u << 20);
  Exposition e;
  write_net_series(e, after, {}, "0");
  EXPECT_TRUE(contains(e.text(), "lf_net_transmit_bytes_total{node=\"0\",interface=\"lo\"} ")) << e.text();
}

TEST(NetCounters, InfinibandPortsFromSysfs) {
  // /sys/class/infiniband's layout (no HCA on this machine).
  const fs::path sys = fs::temp_directory_path() / fmt::format("lf-sys-{}", ::getpid());
  const fs::path port = sys / "class/infiniband/mlx5_0/ports/1";
  fs::create_directories(port / "counters");
  fs::create_directories(port / "hw_counters");
  fs::create_directories(sys / "class/infiniband/mlx5_1/ports/1/counters");
  std::ofstream(port / "state") << "4: ACTIVE\n";
  std::ofstream(port / "link_layer") << "InfiniBand\n";
  std::ofstream(port / "counters/port_rcv_data") << "1000\n";
  std::ofstream(port / "counters/port_xmit_discards") << "7\n";
  std::ofstream(port / "hw_counters/out_of_sequence") << "3\n";
  std::ofstream(sys / "class/infiniband/mlx5_1/ports/1/state") << "1: DOWN\n";
  const auto ib = read_ib_ports(sys);
  ASSERT_EQ(ib.size(), 2u);
  Exposition e;
  write_net_series(e, {}, ib, "2");
  const std::string t = e.text();
  EXPECT_TRUE(contains(t, "lf_ib_port_active{node=\"2\",hca=\"mlx5_0\",port=\"1\",link_layer=\"InfiniBand\"} 1")) << t;
  EXPECT_TRUE(contains(t, "lf_ib_port_active{node=\"2\",hca=\"mlx5_1\",port=\"1\",link_layer=\"\"} 0")) << t;
  EXPECT_TRUE(contains(t, "lf_ib_port_receive_bytes_total{node=\"2\",hca=\"mlx5_0\",port=\"1\"} 4000")) << t;
  EXPECT_TRUE(contains(t, "lf_ib_port_transmit_discards_total{node=\"2\",hca=\"mlx5_0\",port=\"1\"} 7")) << t;
  EXPECT_TRUE(contains(t, "lf_ib_port_hw_events_total{node=\"2\",hca=\"mlx5_0\",port=\"1\",counter=\"out_of_sequence\"} 3"))
      << t;
  fs::remove_all(sys);
}

// ---- GPUs without CUDA -------------------------------------------------------------------------

TEST(Nvml, AbsentLibraryIsAnAnswerNotACrash) {
  std::string why;
  EXPECT_EQ(Nvml::open(&why, "libnvidia-ml-not-here.so.1"), nullptr);
  EXPECT_TRUE(contains(why, "libnvidia-ml-not-here.so.1 not loadable")) << why;
  EXPECT_EQ(Nvml::open(&why, "libc.so.6"), nullptr);
  EXPECT_TRUE(contains(why, "lacks NVML's entry points")) << why;
  GpuSampler sampler(0.1, "libnvidia-ml-not-here.so.1");
  EXPECT_FALSE(sampler.available());
  EXPECT_TRUE(sampler.latest().empty());
}

std::vector<GpuSample> four_gpus() {
  std::vector<GpuSample> g(4);
  for (unsigned i = 0; i < 4; ++i) {
    g[i].index = i;
    g[i].uuid = fmt::format("GPU-{}a2b-0000", i);
    g[i].name = "NVIDIA H200";
  }
  return g;
}

TEST(CudaVisibleDevices, ParsedAsCudaParsesIt) {
  const auto gpus = four_gpus();
  auto v = parse_cuda_visible_devices(std::string("2,0"), 4, gpus);
  EXPECT_EQ(v.entries, (std::vector<std::string>{"2", "0"}));
  EXPECT_EQ(resolve_visible(v, gpus), (std::vector<std::optional<unsigned>>{2u, 0u}));
  v = parse_cuda_visible_devices(std::string("0,7,1"), 4, gpus);  // out of range: the list ends there
  EXPECT_EQ(v.entries, std::vector<std::string>{"0"});
  EXPECT_EQ(v.stopped_at, "7");
  EXPECT_TRUE(contains(v.why_stopped, "out of range")) << v.why_stopped;
  v = parse_cuda_visible_devices(std::string("GPU-3a2b,1"), 4, gpus);  // a unique UUID prefix
  EXPECT_EQ(resolve_visible(v, gpus), (std::vector<std::optional<unsigned>>{3u, 1u}));
  v = parse_cuda_visible_devices(std::string("GPU-"), 4, gpus);  // ambiguous prefix
  EXPECT_TRUE(v.entries.empty());
  EXPECT_TRUE(contains(v.why_stopped, "several GPUs")) << v.why_stopped;
  v = parse_cuda_visible_devices(std::string("1,1"), 4, gpus);
  EXPECT_EQ(v.entries, std::vector<std::string>{"1"});
  EXPECT_TRUE(contains(v.why_stopped, "twice"));
  v = parse_cuda_visible_devices(std::string("-1"), 4, gpus);
  EXPECT_TRUE(v.set && v.entries.empty());
  v = parse_cuda_visible_devices(std::string(" 1 ,x"), 4, gpus);
  EXPECT_EQ(v.entries, std::vector<std::string>{"1"});
  EXPECT_EQ(v.stopped_at, "x");
  v = parse_cuda_visible_devices(std::nullopt, 4, gpus);
  EXPECT_EQ(resolve_visible(v, gpus).size(), 4u);
}

TEST(GpuSeries, DcgmNamesInBaseUnitsAndAbsentFieldsAbsent) {
  auto gpus = four_gpus();
  gpus.resize(1);
  gpus[0].utilization_ratio = 0.97;
  gpus[0].memory_used_bytes = 80e9;
  gpus[0].temperature_celsius = 61;
  gpus[0].sm_clock_hertz = 1980e6;
  Exposition e;
  write_gpu_series(e, gpus, "0");
  const std::string t = e.text();
  EXPECT_TRUE(contains(t, "lf_gpu_utilization_ratio{node=\"0\",gpu=\"0\",uuid=\"GPU-0a2b-0000\",model_name=\"NVIDIA "
                          "H200\",pci_bus_id=\"\"} 0.97"))
      << t;
  EXPECT_TRUE(contains(t, "lf_gpu_sm_clock_hertz{")) << t;
  EXPECT_FALSE(contains(t, "lf_gpu_power_watts")) << t;
  EXPECT_FALSE(contains(t, "lf_gpu_xid_errors_total")) << t;
}

TEST(GpuSeries, EveryFieldOnTwoGpus) {
  auto gpus = four_gpus();
  gpus.resize(2);
  for (auto& g : gpus) {
    g.pci_bus_id = "00000000:19:00.0";
    g.utilization_ratio = g.memory_copy_utilization_ratio = 0.5;
    g.memory_used_bytes = g.memory_free_bytes = 70e9;
    g.memory_total_bytes = 143e9;
    g.temperature_celsius = 60;
    g.power_watts = 500;
    g.energy_joules = 1e6;
    g.sm_clock_hertz = g.memory_clock_hertz = 1.98e9;
    g.pcie_tx_bytes_per_second = g.pcie_rx_bytes_per_second = 1e9;
    g.pcie_replays = 0;
    g.nvlink_tx_bytes = g.nvlink_rx_bytes = 1e12;
    g.xid_errors = 1;
    g.last_xid = 79;
  }
  Exposition e;
  write_gpu_series(e, gpus, "0");
  const std::string t = e.text();
  for (const char* name :
       {"lf_gpu_utilization_ratio", "lf_gpu_memory_copy_utilization_ratio", "lf_gpu_memory_used_bytes",
        "lf_gpu_memory_free_bytes", "lf_gpu_memory_total_bytes", "lf_gpu_temperature_celsius", "lf_gpu_power_watts",
        "lf_gpu_energy_joules_total", "lf_gpu_sm_clock_hertz", "lf_gpu_memory_clock_hertz",
        "lf_gpu_pcie_transmit_bytes_per_second", "lf_gpu_pcie_receive_bytes_per_second", "lf_gpu_pcie_replays_total",
        "lf_gpu_nvlink_transmit_bytes_total", "lf_gpu_nvlink_receive_bytes_total", "lf_gpu_xid_errors_total",
        "lf_gpu_last_xid"})
    EXPECT_TRUE(contains(t, std::string("\n") + name + "{node=\"0\",gpu=\"1\"")) << name << "\n" << t;
  // tests/launcher/test_metrics.py runs this through promtool and checks the docs' queries against it.
  if (const char* dump = std::getenv("LF_GPU_EXPOSITION_DUMP")) std::ofstream(dump) << t;
}

// ---- health -------------------------------------------------------------------------------

struct HealthFixture {
  HealthThresholds t;
  HealthClock::time_point t0 = HealthClock::now();
  std::vector<GpuSample> gpus = four_gpus();
  RankSeries ranks;
  HealthInput input(double at_s) {
    HealthInput in;
    in.now = t0 + std::chrono::milliseconds(static_cast<int64_t>(at_s * 1000));
    in.node = "node 1 (host-b)";
    in.gpus = &gpus;
    in.gpu_of_ordinal = {0u, 1u, 2u, 3u};
    in.ranks = &ranks.ranks();
    return in;
  }
};

TEST(Health, HotGpuWarnsAfterTheDurationNamesNodeRankGpuValueThenClears) {
  HealthFixture f;
  f.ranks.update({training_report(4, 1, 2, 1), training_report(5, 1, 2, 1)}, 0);
  // local ranks 4, 5 -> ordinals 4 % 4 = 0, 5 % 4 = 1
  HealthMonitor m(f.t);
  f.gpus[1].temperature_celsius = 90;
  EXPECT_TRUE(m.check(f.input(0)).empty());
  EXPECT_TRUE(m.check(f.input(59)).empty());
  auto ev = m.check(f.input(60.5));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_TRUE(ev[0].warning);
  for (const char* part : {"GPU 1", "GPU-1a2b-0000", "rank 5", "node 1 (host-b)", "90 °C", "above 85 °C"})
    EXPECT_TRUE(contains(ev[0].line, part)) << part << " in " << ev[0].line;
  EXPECT_TRUE(m.check(f.input(61)).empty());        // once, not every second
  EXPECT_EQ(m.check(f.input(361)).size(), 1u);      // a reminder after LF_HEALTH_REPEAT_S
  f.gpus[1].temperature_celsius = 70;
  ev = m.check(f.input(362));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_FALSE(ev[0].warning);
  EXPECT_TRUE(contains(ev[0].line, "back to 70 °C")) << ev[0].line;
}

TEST(Health, MemoryGrowthOverTheWindow) {
  HealthFixture f;
  HealthMonitor m(f.t);
  f.gpus.resize(1);
  f.gpus[0].memory_used_bytes = 10e9;
  EXPECT_TRUE(m.check(f.input(0)).empty());
  f.gpus[0].memory_used_bytes = 12e9;
  EXPECT_TRUE(m.check(f.input(150)).empty());
  f.gpus[0].memory_used_bytes = 14e9;  // +40% over 300 s
  auto ev = m.check(f.input(300));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_TRUE(contains(ev[0].line, "grew 40% in 300 s")) << ev[0].line;
  EXPECT_TRUE(contains(ev[0].line, "GPU 0")) << ev[0].line;
  EXPECT_TRUE(contains(ev[0].line, "no rank of this job")) << ev[0].line;
}

TEST(Health, StragglerByMedianBusyTime) {
  HealthFixture f;
  HealthMonitor m(f.t);
  for (int step = 1; step <= 6; ++step) {
    f.ranks.update({training_report(0, step, 2, 1.0), training_report(1, step, 2, 1.1), training_report(2, step, 2, 2.5)},
                   step);
    const auto ev = m.check(f.input(step));
    if (step < 5) EXPECT_TRUE(ev.empty()) << step;  // too few steps for a median
    if (step == 5) {
      ASSERT_EQ(ev.size(), 1u);
      for (const char* part : {"straggler: rank 2", "node 1 (host-b)", "GPU 2", "2.500 s", "2.4x"})
        EXPECT_TRUE(contains(ev[0].line, part)) << part << " in " << ev[0].line;
    }
  }
}

TEST(Health, HeartbeatGapOfAWorkerAndOfTheServer) {
  HealthFixture f;
  HealthMonitor m(f.t);
  auto r = training_report(3, 41, 2, 1);
  r.since_beat_s = 12.5;
  f.ranks.update({r}, 0);
  auto in = f.input(0);
  in.master_silence_s = 2.6;
  const auto ev = m.check(in);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_TRUE(contains(ev[0].line, "rank 3 on node 1 (host-b), GPU 3 (GPU-3a2b-0000) (pid 1003): no heartbeat for 12.5 s"))
      << ev[0].line;
  EXPECT_TRUE(contains(ev[0].line, "step 41")) << ev[0].line;
  EXPECT_TRUE(contains(ev[1].line, "no message from the rendezvous server for 2.6 s")) << ev[1].line;
}

TEST(Health, ThresholdsFromTheEnvironmentAndBadValues) {
  ::setenv("LF_HEALTH_GPU_TEMP_C", "1", 1);
  EXPECT_EQ(HealthThresholds::from_env().gpu_temp_c, 1);
  ::setenv("LF_HEALTH_GPU_TEMP_C", "hot", 1);
  try {
    HealthThresholds::from_env();
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "LF_HEALTH_GPU_TEMP_C='hot': expected")) << e.what();
  }
  ::unsetenv("LF_HEALTH_GPU_TEMP_C");
  ::setenv("LF_HEALTH_STRAGGLER_FACTOR", "-2", 1);  // a number, but no threshold
  try {
    HealthThresholds::from_env();
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "LF_HEALTH_STRAGGLER_FACTOR=-2 is not a number >= 0")) << e.what();
  }
  ::unsetenv("LF_HEALTH_STRAGGLER_FACTOR");
}

// ---- the endpoint over real sockets --------------------------------------------------------------

// One HTTP/1.1 exchange on a connected socket: the status line and the body.
std::pair<std::string, std::string> http_get(int fd, const std::string& target, bool keep_alive = true) {
  const std::string req = fmt::format("GET {} HTTP/1.1\r\nHost: x\r\n{}\r\n", target,
                                      keep_alive ? "" : "Connection: close\r\n");
  EXPECT_EQ(::send(fd, req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
  std::string in;
  char buf[4096];
  size_t body_at = std::string::npos, length = 0;
  while (true) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
    if (body_at == std::string::npos && (body_at = in.find("\r\n\r\n")) != std::string::npos) {
      body_at += 4;
      const auto cl = in.find("Content-Length: ");
      length = std::stoul(in.substr(cl + 16));
    }
    if (body_at != std::string::npos && in.size() >= body_at + length) break;
  }
  return {in.substr(0, in.find("\r\n")), body_at == std::string::npos ? "" : in.substr(body_at, length)};
}

int connect_to(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  return fd;
}

TEST(MetricsServer, ServesKeepAliveScrapesAnswers404AndRefusesAPortInUse) {
  boost::asio::io_context io;
  int calls = 0;
  MetricsServer server(io, [&] { return fmt::format("lf_calls {}\n", ++calls); });
  server.start("127.0.0.1", 0);
  const uint16_t port = server.port();
  ASSERT_GT(port, 0);
  std::thread runner([&] { io.run(); });
  const int fd = connect_to(port);
  auto [s1, b1] = http_get(fd, "/metrics");
  auto [s2, b2] = http_get(fd, "/metrics");  // same connection
  auto [s3, b3] = http_get(fd, "/nothing");
  ::close(fd);
  EXPECT_EQ(s1, "HTTP/1.1 200 OK");
  EXPECT_EQ(b1, "lf_calls 1\n");
  EXPECT_EQ(b2, "lf_calls 2\n");
  EXPECT_EQ(s3, "HTTP/1.1 404 Not Found");
  // Another server on the same port: a NetworkError naming it.
  boost::asio::io_context io2;
  MetricsServer second(io2, [] { return std::string(); });
  try {
    second.start("127.0.0.1", port);
    ADD_FAILURE() << "no error";
  } catch (const NetworkError& e) {
    EXPECT_TRUE(contains(e.what(), fmt::format("127.0.0.1:{}", port))) << e.what();
    EXPECT_TRUE(contains(e.what(), "--metrics-port")) << e.what();
  }
  boost::asio::post(io, [&] { server.stop(); });
  runner.join();  // stop() closed everything: run() returns
  EXPECT_EQ(server.scrapes(), 2u);
}

TEST(NodeExporter, AgentSeriesRanksAndNoGpuWithoutNvml) {
  boost::asio::io_context io;
  ::setenv("LF_NVML_LIBRARY", "libnvidia-ml-not-here.so.1", 1);
  auto opt = ExporterOptions::from_env(0);
  ::unsetenv("LF_NVML_LIBRARY");
  opt.bind_host = "127.0.0.1";
  // A sysfs of our own: one interface, one InfiniBand port (every family at once).
  const fs::path sys = fs::temp_directory_path() / fmt::format("lf-exp-sys-{}", ::getpid());
  fs::create_directories(sys / "class/net/ib0/statistics");
  for (const char* f : {"rx_bytes", "tx_bytes", "rx_errors", "tx_errors", "rx_dropped", "tx_dropped"})
    std::ofstream(sys / "class/net/ib0/statistics" / f) << "12\n";
  const fs::path port = sys / "class/infiniband/mlx5_0/ports/1";
  fs::create_directories(port / "counters");
  fs::create_directories(port / "hw_counters");
  std::ofstream(port / "state") << "4: ACTIVE\n";
  std::ofstream(port / "counters/port_rcv_data") << "10\n";
  std::ofstream(port / "counters/port_xmit_data") << "10\n";
  // Every other counter the exporter knows, so the dump (promtool, the docs' queries) has each family.
  for (const char* f : {"port_rcv_packets", "port_xmit_packets", "port_rcv_errors", "port_xmit_discards",
                        "symbol_error", "link_downed", "link_error_recovery", "port_xmit_wait",
                        "port_rcv_remote_physical_errors"})
    std::ofstream(port / "counters" / f) << "0\n";
  std::ofstream(port / "hw_counters/out_of_sequence") << "0\n";
  opt.sys_root = sys.string();
  // Global rank 0 and rank 2 on this node: the job's series come from rank 0 once.
  std::vector<RankReport> reports = {training_report(0, 7, 3.25, 0.4), training_report(2, 7, 3.25, 0.4)};
  NodeExporter ex(io, opt, [&] { return reports; },
                  [] {
                    AgentFacts f;
                    f.node_rank = 1;
                    f.generation = 2;
                    f.restarts = 2;
                    f.hostname = "host-b";
                    f.rdzv_id = "job \"x\"";
                    f.version = "0.1.0";
                    f.master_silence_s = 0.2;
                    return f;
                  });
  ex.start();
  ex.render();
  reports = {training_report(0, 9, 3.0, 0.5), training_report(2, 9, 3.0, 0.5)};
  for (auto& r : reports)
    r.metrics_json = R"({"loss":3.0,"learning_rate":1e-05,"grad_norm":0.4,"epoch":0.5,"tokens_per_s":10,)"
                     R"("mfu":0.41,"step_s":0.5,"comm_exposed_s":0.02,"eval_loss":3.5,"checkpoint_s":1.5,)"
                     R"("total_steps":30,"tokens":4096,"rewards/accuracies":0.75,"rewards/margins":0.25,"kl":0.5,)"
                     R"("logps/chosen":-42.5,"logits/rejected":-1.25})";  // kl etc.: stage dpo / kto
  const std::string t = ex.render();
  for (const char* part : {"lf_agent_generation{node=\"1\"} 2", "lf_agent_restarts_total{node=\"1\"} 2",
                           "lf_agent_worker_up{node=\"1\",rank=\"2\",local_rank=\"2\"} 1",
                           "lf_agent_master_heartbeat_age_seconds{node=\"1\"} 0.2",
                           "lf_agent_gpu_metrics_available{node=\"1\"} 0",
                           "lf_train_mfu{node=\"1\",rank=\"2\",local_rank=\"2\"} 0.41",
                           "lf_train_loss{node=\"1\",rank=\"0\",local_rank=\"0\"} 3",
                           "lf_train_total_steps{node=\"1\",rank=\"0\",local_rank=\"0\"} 30",
                           "# TYPE lf_train_tokens_total counter",
                           "lf_train_tokens_total{node=\"1\",rank=\"0\",local_rank=\"0\"} 4096",
                           "lf_train_rewards_accuracy{node=\"1\",rank=\"0\",local_rank=\"0\"} 0.75",
                           "lf_train_rewards_margin{node=\"1\",rank=\"0\",local_rank=\"0\"} 0.25",
                           "lf_train_kl{node=\"1\",rank=\"0\",local_rank=\"0\"} 0.5",
                           "lf_train_logps_chosen{node=\"1\",rank=\"0\",local_rank=\"0\"} -42.5",
                           "lf_train_logits_rejected{node=\"1\",rank=\"0\",local_rank=\"0\"} -1.25",
                           "lf_train_step_seconds_count{node=\"1\",rank=\"2\",local_rank=\"2\"} 2",
                           "lf_net_receive_bytes_total{node=\"1\",interface=\"ib0\"} 12",
                           "lf_ib_port_receive_bytes_total{node=\"1\",hca=\"mlx5_0\",port=\"1\"} 40"})
    EXPECT_TRUE(contains(t, part)) << part << "\n" << t;
  EXPECT_FALSE(contains(t, "\nlf_gpu_")) << t;  // no sample (lf_agent_gpu_metrics_available's help names them)
  EXPECT_FALSE(contains(t, "lf_train_loss{node=\"1\",rank=\"2\"")) << t;  // the job's series: rank 0's only
  // tests/launcher/test_metrics.py runs this exposition through promtool.
  if (const char* dump = std::getenv("LF_EXPOSITION_DUMP")) std::ofstream(dump) << t;
  ex.stop();
  fs::remove_all(sys);
}

}  // namespace
}  // namespace lf::metrics
