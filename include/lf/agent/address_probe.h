#pragma once
// Probes that decide who hosts the rendezvous when no NODE_RANK is given: is an
// address one of this host's, and does a server already answer on a port there.
// Blocking, bounded by their timeouts; called before the agent's io loop runs.
#include <chrono>
#include <cstdint>
#include <string>

namespace lf::agent {

// True when `host` (a name or an address) resolves to an address of this machine
// (loopback included): a socket can be bound to it.
bool is_local_address(const std::string& host);

// True when a TCP connect to host:port succeeds within `wait` (refusals are retried
// every 100 ms until then: a server that is starting gets the time to bind).
bool server_answers(const std::string& host, uint16_t port, std::chrono::milliseconds wait);

}  // namespace lf::agent
