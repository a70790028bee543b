// lf-scrape-load --port P [--host H] [--rate 1000] [--seconds 10] [--connections 4]:
// scrapes http://H:P/metrics at a fixed total rate over keep-alive connections and prints
// one JSON line: {"sent":..., "answered":..., "errors":..., "achieved_per_s":..., "p99_ms":...}.
// "answered" counts 200 responses whose whole body arrived. A connection that fails is
// reopened (and the scrape counted as an error). Exit 0 when every scrape was answered.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

int open_connection(const std::string& host, uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// One scrape on a keep-alive connection: true for a complete 200 response.
bool scrape(int fd, const std::string& request, std::string& buf) {
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) return false;
  buf.clear();
  size_t body_at = std::string::npos, length = 0;
  char chunk[65536];
  while (true) {
    const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n <= 0) return false;
    buf.append(chunk, static_cast<size_t>(n));
    if (body_at == std::string::npos) {
      const auto end = buf.find("\r\n\r\n");
      if (end == std::string::npos) continue;
      body_at = end + 4;
      auto cl = buf.find("Content-Length: ");
      if (cl == std::string::npos) cl = buf.find("content-length: ");
      if (cl == std::string::npos || cl > end) return false;
      length = std::stoul(buf.substr(cl + 16));
    }
    if (buf.size() >= body_at + length) return buf.rfind("HTTP/1.1 200", 0) == 0 && length > 0;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"scrape a metrics endpoint at a fixed rate"};
  std::string host = "127.0.0.1";
  int port = 0, connections = 4;
  double rate = 1000, seconds = 10;
  app.add_option("--host", host);
  app.add_option("--port", port)->required();
  app.add_option("--rate", rate, "scrapes per second, all connections together");
  app.add_option("--seconds", seconds);
  app.add_option("--connections", connections);
  CLI11_PARSE(app, argc, argv);
  const std::string request = fmt::format("GET /metrics HTTP/1.1\r\nHost: {}:{}\r\n\r\n", host, port);
  std::atomic<uint64_t> sent{0}, answered{0}, errors{0};
  std::mutex mu;
  std::vector<double> latencies_ms;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  const auto every = std::chrono::duration<double>(connections / rate);
  std::vector<std::thread> threads;
  for (int c = 0; c < connections; ++c)
    threads.emplace_back([&, c] {
      int fd = open_connection(host, static_cast<uint16_t>(port));
      std::string buf;
      std::vector<double> mine;
      // Staggered start; each scrape has its slot (a late one is sent at once, not skipped).
      auto next = start + std::chrono::duration_cast<Clock::duration>(every * (static_cast<double>(c) / connections));
      while (next < end) {
        std::this_thread::sleep_until(next);
        next += std::chrono::duration_cast<Clock::duration>(every);
        ++sent;
        const auto t0 = Clock::now();
        if (fd >= 0 && scrape(fd, request, buf)) {
          ++answered;
          mine.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
          continue;
        }
        ++errors;
        if (fd >= 0) ::close(fd);
        fd = open_connection(host, static_cast<uint16_t>(port));
      }
      if (fd >= 0) ::close(fd);
      std::lock_guard lock(mu);
      latencies_ms.insert(latencies_ms.end(), mine.begin(), mine.end());
    });
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::sort(latencies_ms.begin(), latencies_ms.end());
  const double p99 = latencies_ms.empty() ? 0 : latencies_ms[latencies_ms.size() * 99 / 100];
  const double p50 = latencies_ms.empty() ? 0 : latencies_ms[latencies_ms.size() / 2];
  fmt::print("{{\"sent\": {}, \"answered\": {}, \"errors\": {}, \"seconds\": {:.2f}, \"achieved_per_s\": {:.1f}, "
             "\"p50_ms\": {:.3f}, \"p99_ms\": {:.3f}}}\n",
             sent.load(), answered.load(), errors.load(), elapsed, static_cast<double>(answered.load()) / elapsed, p50,
             p99);
  return answered == sent && sent > 0 ? 0 : 1;
}
