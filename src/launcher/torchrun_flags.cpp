#include "torchrun_flags.h"

#include <CLI/CLI.hpp>

#include <algorithm>

#include "lf/common/error.h"

namespace lf {

void add_torchrun_flags(CLI::App* cmd, TorchrunFlags& t) {
  cmd->add_flag("--standalone", t.standalone,
                "torchrun's single-node mode: one node, rendezvous on 127.0.0.1 at a free port");
  cmd->add_option("--rdzv-backend,--rdzv_backend", t.rdzv_backend,
                  "torchrun's rendezvous backend: c10d and static mean lf-train's own rendezvous (node 0 hosts it)");
  cmd->add_option("--rdzv-endpoint,--rdzv_endpoint", t.rdzv_endpoint,
                  "HOST[:PORT] of the rendezvous (= --master-addr HOST --master-port PORT; PORT defaults to 29400 "
                  "as in torchrun)");
  cmd->add_flag("--no-python,--no_python", t.no_python,
                "Run the command as it is, even a .py script (default: `python3 -u SCRIPT.py`, as torchrun does)");
}

void apply_torchrun_flags(const TorchrunFlags& t, LaunchFlags& f) {
  if (!t.rdzv_backend.empty())
    LF_CHECK(t.rdzv_backend == "c10d" || t.rdzv_backend == "static", ConfigError,
             "--rdzv-backend {}: lf-train runs its own rendezvous (hosted by node 0, or the agent on the "
             "--rdzv-endpoint host), which plays the part of torchrun's c10d and static backends; etcd is not "
             "supported: use --rdzv-backend c10d, or leave it out",
             t.rdzv_backend);
  if (!t.rdzv_endpoint.empty()) {
    // HOST:PORT, [IPv6]:PORT or HOST alone.
    std::string host = t.rdzv_endpoint, port_text;
    if (!host.empty() && host.front() == '[') {
      const auto close = host.find(']');
      LF_CHECK(close != std::string::npos && (close + 1 == host.size() || host[close + 1] == ':'), ConfigError,
               "--rdzv-endpoint {}: expected HOST[:PORT]", t.rdzv_endpoint);
      if (close + 1 < host.size()) port_text = host.substr(close + 2);
      host = host.substr(1, close - 1);
    } else if (std::count(host.begin(), host.end(), ':') == 1) {
      port_text = host.substr(host.find(':') + 1);
      host = host.substr(0, host.find(':'));
    }
    int64_t port = 29400;  // torchrun's default rendezvous port
    if (!port_text.empty()) {
      size_t used = 0;
      try {
        port = std::stoll(port_text, &used);
      } catch (const std::exception&) {
      }
      LF_CHECK(used == port_text.size(), ConfigError, "--rdzv-endpoint {}: expected HOST[:PORT]", t.rdzv_endpoint);
    }
    LF_CHECK(!host.empty() && port > 0 && port < 65536, ConfigError, "--rdzv-endpoint {}: expected HOST[:PORT]",
             t.rdzv_endpoint);
    LF_CHECK(f.master_addr.empty() || f.master_addr == host, ConfigError,
             "--rdzv-endpoint {} and --master-addr {} name different hosts: give one of them", t.rdzv_endpoint,
             f.master_addr);
    LF_CHECK(f.master_port < 0 || f.master_port == port, ConfigError,
             "--rdzv-endpoint {} and --master-port {} name different ports: give one of them", t.rdzv_endpoint,
             f.master_port);
    f.master_addr = host;
    f.master_port = port;
  }
  if (t.standalone) {
    LF_CHECK(f.nnodes.empty() || f.nnodes == "1" || f.nnodes == "1:1", ConfigError,
             "--standalone is a single-node job, but --nnodes is {}", f.nnodes);
    LF_CHECK(t.rdzv_endpoint.empty(), ConfigError,
             "--standalone picks its own rendezvous on this host: leave out --rdzv-endpoint {}", t.rdzv_endpoint);
    f.nnodes = "1";
    f.node_rank = 0;
    f.master_addr = "127.0.0.1";
    f.master_port = 0;  // any free port: nobody else has to find it
  }
}

std::vector<std::string> with_python_for_scripts(std::vector<std::string> command, bool no_python) {
  if (no_python || command.empty()) return command;
  const std::string& first = command.front();
  if (first.size() > 3 && first.compare(first.size() - 3, 3, ".py") == 0) command.insert(command.begin(), {"python3", "-u"});
  return command;
}

}  // namespace lf
