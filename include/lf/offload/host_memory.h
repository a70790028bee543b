#pragma once
// Host memory check before an offloaded run loads anything: the pinned host
// buffers it will allocate on this node against what the node (MemAvailable)
// and the container (its cgroup's memory limit) leave, so too little memory is
// a clear error at start, not an OOM kill an hour in.
#include <cstdint>
#include <optional>
#include <string>

#include "lf/offload/cgroup_memory.h"

namespace lf::offload {

struct HostMemory {
  uint64_t mem_available = 0;               // /proc/meminfo MemAvailable
  std::optional<CgroupMemoryLimit> cgroup;  // the tightest cgroup limit, if any
  // RLIMIT_MEMLOCK (soft); nullopt: unlimited. Reported, not enforced: CUDA's pinned
  // allocations (cudaHostAlloc / cudaHostRegister) are pinned by the driver and not
  // charged to it (PyTorch's pin_memory runs under Docker's default 8 MiB), so refusing
  // on it would refuse every default container.
  std::optional<uint64_t> memlock;
  uint64_t available() const;  // min(MemAvailable, the cgroup's room)
};

struct HostMemorySources {
  std::string proc_meminfo = "/proc/meminfo";
  CgroupFiles cgroup;
};

HostMemory read_host_memory(const HostMemorySources& sources = {});

// Throws ConfigError when bytes_needed_on_this_node (every worker of this node together)
// exceeds read_host_memory().available(): what is needed, what is available, which limit
// binds (MemAvailable or the cgroup's path and file), and what to try. `what` names the
// need ("optimizer offload: fp32 master weights and AdamW moments of 7.6B parameters").
void check_host_memory(uint64_t bytes_needed_on_this_node, const std::string& what,
                       const HostMemorySources& sources = {});

// "1.5 GiB" (binary units, as free -h).
std::string format_bytes(uint64_t bytes);

}  // namespace lf::offload
