#pragma once
// Where node 0's rendezvous server listens: the address MASTER_ADDR resolves to on this
// host (the one the other nodes were told), not every address. A loopback MASTER_ADDR
// (127.0.0.1, localhost) keeps the job's port off the network. --rdzv-bind-all listens on
// every address. Blocking (getaddrinfo); called once before the io loop runs.
#include <cstdint>
#include <string>

namespace lf::rdzv {

struct BindChoice {
  std::string address;  // an IP literal for ServerOptions::bind_host
  std::string why;      // for the one log line saying where it listens
};

// ConfigError when MASTER_ADDR resolves to no address of this host (and bind_all is off):
// node 0 must be the host MASTER_ADDR names. A name that resolves to loopback here while
// the job has other nodes (Debian's `127.0.1.1 HOSTNAME` line in /etc/hosts) would be
// unreachable for them: every address then, said so.
BindChoice choose_bind_address(const std::string& master_addr, int64_t max_nodes, bool bind_all);

// 127.0.0.0/8 or ::1 (an IP literal).
bool is_loopback_ip(const std::string& ip);

}  // namespace lf::rdzv
