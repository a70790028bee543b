// lf-rdzv-load: simulates N agents (one TCP connection each) joining one
// rendezvous server, then measures heartbeat throughput. Benchmark tool for
// scripts/bench/rdzv_scale.sh; prints one `RESULT {json}` line.
#include <CLI/CLI.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>
#include <sys/resource.h>

#include <chrono>
#include <fstream>
#include <memory>

#include "lf/common/version.h"
#include "lf/rendezvous/messages.h"

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using namespace lf::rdzv;

namespace {

long rss_kib(int pid) {
  std::ifstream f(fmt::format("/proc/{}/status", pid));
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

struct SimAgent {
  explicit SimAgent(asio::io_context& io) : socket(io) {}
  tcp::socket socket;
  FrameParser parser;
  std::array<char, 4096> buf;
  std::string out;
  bool has_layout = false;
};

struct Load {
  asio::io_context io;
  tcp::endpoint server;
  int n = 0;
  int joined = 0, replied = 0, failed = 0;
  std::string join_frame, heartbeat_batch;
  Clock::time_point t_start, t_joined, t_hb_start, t_hb_done;
  std::vector<std::unique_ptr<SimAgent>> agents;

  void read(SimAgent* a) {
    a->socket.async_read_some(asio::buffer(a->buf), [this, a](boost::system::error_code ec, size_t got) {
      if (ec) return;
      a->parser.feed(std::string_view(a->buf.data(), got));
      while (auto f = a->parser.next()) {
        Message m = decode_message(*f);
        if (std::holds_alternative<LayoutMsg>(m) && !a->has_layout) {
          a->has_layout = true;
          if (++joined == n) {
            t_joined = Clock::now();
            io.stop();
          }
        } else if (std::holds_alternative<StoreReplyMsg>(m)) {
          if (++replied == n) {
            t_hb_done = Clock::now();
            io.stop();
          }
        } else if (std::holds_alternative<RefusedMsg>(m)) {
          fmt::print(stderr, "refused: {}\n", std::get<RefusedMsg>(m).reason);
          ++failed;
          io.stop();
        }
      }
      read(a);
    });
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Simulate N agents joining an lf-train rendezvous server"};
  std::string host = "127.0.0.1";
  int port = 29500, server_pid = 0, heartbeats = 100;
  int n = 256;
  app.add_option("--host", host);
  app.add_option("--port", port)->required();
  app.add_option("--agents", n);
  app.add_option("--heartbeats", heartbeats, "Heartbeats per agent in the throughput phase");
  app.add_option("--server-pid", server_pid, "Read the server's RSS (memory per connection)");
  CLI11_PARSE(app, argc, argv);

  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;  // one descriptor per simulated agent
  setrlimit(RLIMIT_NOFILE, &lim);
  Load load;
  load.n = n;
  load.server = tcp::endpoint(asio::ip::make_address(host), static_cast<uint16_t>(port));
  JoinMsg j;
  j.version = lf::kVersion;
  j.min_nodes = j.max_nodes = n;
  j.hostname = "sim";
  j.job_id = "none";
  load.join_frame = encode_message(j);
  for (int i = 0; i < heartbeats; ++i) load.heartbeat_batch += encode_message(HeartbeatMsg{0});
  StoreRequestMsg probe;
  probe.op = StoreOp::kGet;
  probe.keys = {"probe"};
  load.heartbeat_batch += encode_message(probe);

  long rss_before = server_pid ? rss_kib(server_pid) : -1;
  load.t_start = Clock::now();
  for (int i = 0; i < n; ++i) {
    load.agents.push_back(std::make_unique<SimAgent>(load.io));
    SimAgent* a = load.agents.back().get();
    a->socket.async_connect(load.server, [&load, a](boost::system::error_code ec) {
      if (ec) {
        fmt::print(stderr, "connect failed: {}\n", ec.message());
        ++load.failed;
        load.io.stop();
        return;
      }
      asio::async_write(a->socket, asio::buffer(load.join_frame), [](boost::system::error_code, size_t) {});
      load.read(a);
    });
  }
  load.io.run();
  if (load.failed || load.joined != n) {
    fmt::print(stderr, "only {} of {} agents got a layout\n", load.joined, n);
    return 1;
  }
  long rss_joined = server_pid ? rss_kib(server_pid) : -1;

  load.io.restart();
  load.t_hb_start = Clock::now();
  for (auto& a : load.agents)
    asio::async_write(a->socket, asio::buffer(load.heartbeat_batch), [](boost::system::error_code, size_t) {});
  load.io.run();
  double join_s = std::chrono::duration<double>(load.t_joined - load.t_start).count();
  double hb_s = std::chrono::duration<double>(load.t_hb_done - load.t_hb_start).count();
  double per_conn = (rss_before >= 0 && rss_joined >= 0) ? double(rss_joined - rss_before) * 1024 / n : -1;
  fmt::print("RESULT {{\"agents\": {}, \"all_layouts_s\": {:.4f}, \"heartbeats\": {}, \"heartbeats_per_s\": {:.0f}, "
             "\"server_rss_kib_before\": {}, \"server_rss_kib_joined\": {}, \"server_bytes_per_connection\": {:.0f}}}\n",
             n, join_s, static_cast<long>(n) * heartbeats, double(n) * heartbeats / hb_s, rss_before, rss_joined,
             per_conn);
  return 0;
}
