#include "lf/metrics/net_counters.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace lf::metrics {

namespace fs = std::filesystem;

namespace {

std::optional<uint64_t> read_u64(const fs::path& p) {
  std::ifstream in(p);
  uint64_t v = 0;
  if (!(in >> v)) return std::nullopt;
  return v;
}

std::string read_line(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  return s;
}

std::vector<std::string> sorted_entries(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::end(it); it.increment(ec))
    out.push_back(it->path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::map<std::string, uint64_t> read_all(const fs::path& dir, const std::vector<std::string>& only = {}) {
  std::map<std::string, uint64_t> out;
  for (const auto& name : only.empty() ? sorted_entries(dir) : only)
    if (auto v = read_u64(dir / name)) out[name] = *v;
  return out;
}

// The ones worth a series (the guides' alarms and the throughput); the rest stay in sysfs.
const std::vector<std::string> kIbCounters = {"port_rcv_data",      "port_xmit_data",     "port_rcv_packets",
                                              "port_xmit_packets",  "port_rcv_errors",    "port_xmit_discards",
                                              "symbol_error",       "link_downed",        "link_error_recovery",
                                              "port_xmit_wait",     "port_rcv_remote_physical_errors"};
const std::vector<std::string> kIbHwCounters = {"out_of_sequence", "packet_seq_err", "local_ack_timeout_err",
                                                "rnr_nak_retry_err", "duplicate_request", "implied_nak_seq_err"};

}  // namespace

IfnameSpec IfnameSpec::parse(const std::string& spec) {
  IfnameSpec s;
  std::string rest = spec;
  if (!rest.empty() && rest[0] == '^') {
    s.exclude = true;
    rest.erase(0, 1);
  }
  if (!rest.empty() && rest[0] == '=') {
    s.exact = true;
    rest.erase(0, 1);
  }
  std::stringstream ss(rest);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) s.names.push_back(item);
  return s;
}

bool IfnameSpec::matches(const std::string& ifname) const {
  bool hit = false;
  for (const auto& n : names) hit = hit || (exact ? ifname == n : ifname.rfind(n, 0) == 0);
  return exclude ? !hit : hit;
}

std::vector<std::string> watched_interfaces(const std::optional<std::string>& nccl_socket_ifname, const fs::path& sys) {
  std::vector<std::string> out;
  const auto spec = nccl_socket_ifname ? std::optional<IfnameSpec>(IfnameSpec::parse(*nccl_socket_ifname)) : std::nullopt;
  for (const auto& name : sorted_entries(sys / "class" / "net")) {
    if (spec ? spec->matches(name) : name != "lo") out.push_back(name);
  }
  return out;
}

std::vector<InterfaceCounters> read_interfaces(const std::vector<std::string>& names, const fs::path& sys) {
  std::vector<InterfaceCounters> out;
  for (const auto& name : names) {
    InterfaceCounters c;
    c.name = name;
    c.stats = read_all(sys / "class" / "net" / name / "statistics",
                       {"rx_bytes", "tx_bytes", "rx_errors", "tx_errors", "rx_dropped", "tx_dropped"});
    if (!c.stats.empty()) out.push_back(std::move(c));
  }
  return out;
}

std::vector<IbPortCounters> read_ib_ports(const fs::path& sys) {
  std::vector<IbPortCounters> out;
  const fs::path root = sys / "class" / "infiniband";
  for (const auto& hca : sorted_entries(root)) {
    for (const auto& port : sorted_entries(root / hca / "ports")) {
      IbPortCounters p;
      p.hca = hca;
      try {
        p.port = std::stoi(port);
      } catch (const std::exception&) {
        continue;
      }
      const fs::path dir = root / hca / "ports" / port;
      p.state = read_line(dir / "state");
      p.link_layer = read_line(dir / "link_layer");
      p.counters = read_all(dir / "counters", kIbCounters);
      p.hw_counters = read_all(dir / "hw_counters", kIbHwCounters);
      out.push_back(std::move(p));
    }
  }
  return out;
}

void write_net_series(Exposition& e, const std::vector<InterfaceCounters>& ifs, const std::vector<IbPortCounters>& ib,
                      const std::string& node) {
  struct Stat {
    const char* file;
    const char* name;
    const char* help;
  };
  static const Stat kStats[] = {
      {"rx_bytes", "lf_net_receive_bytes_total", "Bytes received on the interface (node_exporter's name, per NCCL interface)"},
      {"tx_bytes", "lf_net_transmit_bytes_total", "Bytes sent on the interface"},
      {"rx_errors", "lf_net_receive_errors_total", "Receive errors on the interface"},
      {"tx_errors", "lf_net_transmit_errors_total", "Transmit errors on the interface"},
      {"rx_dropped", "lf_net_receive_drop_total", "Received packets dropped"},
      {"tx_dropped", "lf_net_transmit_drop_total", "Packets dropped before sending"},
  };
  for (const auto& s : kStats) {
    bool any = false;
    for (const auto& i : ifs) any = any || i.stats.count(s.file);
    if (!any) continue;
    e.family(s.name, MetricType::kCounter, s.help);
    for (const auto& i : ifs)
      if (auto it = i.stats.find(s.file); it != i.stats.end())
        e.sample({{"node", node}, {"interface", i.name}}, static_cast<double>(it->second));
  }
  if (ib.empty()) return;
  const auto port_labels = [&](const IbPortCounters& p) {
    return Labels{{"node", node}, {"hca", p.hca}, {"port", std::to_string(p.port)}};
  };
  e.family("lf_ib_port_active", MetricType::kGauge, "1 when the IB port state is ACTIVE (ports/<p>/state)");
  for (const auto& p : ib) {
    auto l = port_labels(p);
    l.emplace_back("link_layer", p.link_layer);
    e.sample(l, p.state.find("ACTIVE") != std::string::npos ? 1 : 0);
  }
  struct IbStat {
    const char* file;
    const char* name;
    double scale;
    const char* help;
  };
  static const IbStat kIb[] = {
      {"port_rcv_data", "lf_ib_port_receive_bytes_total", 4, "Bytes received (port_rcv_data counts 4-byte words)"},
      {"port_xmit_data", "lf_ib_port_transmit_bytes_total", 4, "Bytes sent (port_xmit_data x 4)"},
      {"port_rcv_packets", "lf_ib_port_receive_packets_total", 1, "Packets received"},
      {"port_xmit_packets", "lf_ib_port_transmit_packets_total", 1, "Packets sent"},
      {"port_rcv_errors", "lf_ib_port_receive_errors_total", 1, "Received packets with errors (port_rcv_errors)"},
      {"port_xmit_discards", "lf_ib_port_transmit_discards_total", 1,
       "Outbound packets discarded: congestion or a down link (port_xmit_discards)"},
      {"symbol_error", "lf_ib_port_symbol_errors_total", 1, "Link symbol errors (symbol_error)"},
      {"link_downed", "lf_ib_port_link_downed_total", 1, "Times the link went down (link_downed)"},
      {"link_error_recovery", "lf_ib_port_link_error_recovery_total", 1, "Link error recoveries"},
      {"port_xmit_wait", "lf_ib_port_transmit_wait_total", 1, "Ticks with data to send but no credit (congestion)"},
      {"port_rcv_remote_physical_errors", "lf_ib_port_receive_remote_physical_errors_total", 1,
       "Packets marked bad by a remote port"},
  };
  for (const auto& s : kIb) {
    bool any = false;
    for (const auto& p : ib) any = any || p.counters.count(s.file);
    if (!any) continue;
    e.family(s.name, MetricType::kCounter, s.help);
    for (const auto& p : ib)
      if (auto it = p.counters.find(s.file); it != p.counters.end())
        e.sample(port_labels(p), static_cast<double>(it->second) * s.scale);
  }
  bool any_hw = false;
  for (const auto& p : ib) any_hw = any_hw || !p.hw_counters.empty();
  if (!any_hw) return;
  e.family("lf_ib_port_hw_events_total", MetricType::kCounter,
           "RoCE/IB retransmit signs from hw_counters (out_of_sequence, packet_seq_err, local_ack_timeout_err, ...)");
  for (const auto& p : ib)
    for (const auto& [name, v] : p.hw_counters) {
      auto l = port_labels(p);
      l.emplace_back("counter", name);
      e.sample(l, static_cast<double>(v));
    }
}

}  // namespace lf::metrics
