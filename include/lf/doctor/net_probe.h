#pragma once
// Small blocking network probes for doctor, each bounded by a timeout.
#include <cstdint>
#include <string>
#include <vector>

namespace lf::doctor {

enum class ConnectResult { kConnected, kRefused, kTimeout, kUnreachable, kUnresolved };

struct ConnectOutcome {
  ConnectResult result = ConnectResult::kTimeout;
  std::string address;  // the address tried
  std::string error;    // strerror / gai_strerror
};

// A TCP connect to host:port (non-blocking connect + poll: a host that drops SYNs costs
// `timeout_s`, not the kernel's two minutes).
ConnectOutcome tcp_connect(const std::string& host, uint16_t port, double timeout_s);
// The addresses `host` resolves to ("" and the resolver's message when it does not).
std::vector<std::string> resolve(const std::string& host, std::string* error);
// Whether something could bind host:port now (0.0.0.0 when host is local to every address);
// on failure `error` says why (errno text).
bool can_bind(uint16_t port, std::string* error);
// Who listens on TCP `port` here: "pid 1234 (python3)", or "" when /proc does not say.
std::string port_owner(uint16_t port, const std::string& proc_root = "/proc");

}  // namespace lf::doctor
