#pragma once
// DeepSpeed's hostfile (the `--hostfile` of `deepspeed` and of lf-train): one host a line,
// `worker01 slots=4`, `#` comments, blank lines. Torch-free.
#include <cstdint>
#include <string>
#include <vector>

namespace lf {

struct HostEntry {
  std::string host;    // what ssh connects to; the first one is MASTER_ADDR
  int64_t slots = -1;  // workers on that host; -1: not given (the host's visible GPUs)
};

// ConfigError with path:line and the expected form for a malformed line, a duplicate host,
// or a file with no host.
std::vector<HostEntry> read_hostfile(const std::string& path);

}  // namespace lf
