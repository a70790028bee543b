#pragma once
// Network counters from sysfs, no tools needed: bytes/errors/drops of the interfaces NCCL
// uses (/sys/class/net/<if>/statistics) and the InfiniBand port counters the multi-node
// guides alarm on (/sys/class/infiniband/<hca>/ports/<p>/counters: port_rcv_errors,
// port_xmit_discards, ...; hw_counters: the RoCE retransmit signs). `sys` is the sysfs
// root, a parameter so tests can point it at a tree of their own. Cheap: a few small
// file reads, fine on the io thread.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lf/metrics/exposition.h"

namespace lf::metrics {

// NCCL_SOCKET_IFNAME as NCCL reads it: comma-separated prefixes ("eth,ens"); a leading
// '^' excludes them instead; a leading '=' (after any '^') makes them exact names.
struct IfnameSpec {
  bool exclude = false, exact = false;
  std::vector<std::string> names;
  static IfnameSpec parse(const std::string& spec);
  bool matches(const std::string& ifname) const;
};

struct InterfaceCounters {
  std::string name;
  std::map<std::string, uint64_t> stats;  // rx_bytes, tx_bytes, rx_errors, tx_errors, rx_dropped, tx_dropped
};

struct IbPortCounters {
  std::string hca;
  int port = 0;
  std::string state;       // "4: ACTIVE"
  std::string link_layer;  // InfiniBand | Ethernet (RoCE)
  std::map<std::string, uint64_t> counters, hw_counters;
};

// The interfaces to watch: those NCCL_SOCKET_IFNAME selects, or, when it is unset, every
// interface but loopback (NCCL's own default also skips docker*; we still show those).
std::vector<std::string> watched_interfaces(const std::optional<std::string>& nccl_socket_ifname,
                                            const std::filesystem::path& sys = "/sys");
std::vector<InterfaceCounters> read_interfaces(const std::vector<std::string>& names,
                                               const std::filesystem::path& sys = "/sys");
// Every port of every HCA (empty without /sys/class/infiniband).
std::vector<IbPortCounters> read_ib_ports(const std::filesystem::path& sys = "/sys");

void write_net_series(Exposition& e, const std::vector<InterfaceCounters>& ifs, const std::vector<IbPortCounters>& ib,
                      const std::string& node);

}  // namespace lf::metrics
