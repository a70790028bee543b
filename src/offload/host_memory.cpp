// read_host_memory / check_host_memory: MemAvailable, the cgroup limit and
// RLIMIT_MEMLOCK, and the error a user gets when the offloaded state does not fit.
#include "lf/offload/host_memory.h"

#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <limits>

#include "lf/common/error.h"

namespace lf::offload {

namespace {

// MemAvailable from meminfo ("MemAvailable:   22747340 kB"); ConfigError if absent
// (kernels before 3.14 lack it: the check would be guessing).
uint64_t mem_available(const std::string& meminfo) {
  std::ifstream in(meminfo);
  std::string key, unit;
  uint64_t kib = 0;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  LF_THROW(ConfigError, "host memory check: no MemAvailable line in {} (Linux 3.14 or later has it)", meminfo);
}

std::optional<uint64_t> memlock_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_MEMLOCK, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return std::nullopt;
  return static_cast<uint64_t>(r.rlim_cur);
}

std::string binding_limit(const HostMemory& m) {
  if (m.cgroup && m.cgroup->available() < m.mem_available)
    return fmt::format("the cgroup {} allows {} ({}) and {} of it is in use", m.cgroup->path,
                       format_bytes(m.cgroup->limit), m.cgroup->limit_file, format_bytes(m.cgroup->in_use));
  return fmt::format("MemAvailable in /proc/meminfo is {} (memory other processes on the node leave free)",
                     format_bytes(m.mem_available));
}

}  // namespace

uint64_t HostMemory::available() const {
  return cgroup ? std::min(mem_available, cgroup->available()) : mem_available;
}

std::string format_bytes(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, kUnits[u]);
}

HostMemory read_host_memory(const HostMemorySources& sources) {
  HostMemory m;
  m.mem_available = mem_available(sources.proc_meminfo);
  m.cgroup = tightest_cgroup_memory_limit(sources.cgroup);
  m.memlock = memlock_limit();
  return m;
}

void check_host_memory(uint64_t bytes_needed_on_this_node, const std::string& what,
                       const HostMemorySources& sources) {
  const HostMemory m = read_host_memory(sources);
  if (bytes_needed_on_this_node <= m.available()) return;
  const std::string cgroup =
      m.cgroup ? fmt::format("; cgroup {} limit {} ({}), {} in use", m.cgroup->path, format_bytes(m.cgroup->limit),
                             m.cgroup->limit_file, format_bytes(m.cgroup->in_use))
               : "; no cgroup memory limit";
  LF_THROW(ConfigError,
           "{}: needs {} ({} bytes) of host memory on this node, but only {} is available: {}. "
           "[MemAvailable {}{}; RLIMIT_MEMLOCK {}.] Try fewer workers per node (--nproc-per-node / NPROC_PER_NODE), "
           "offload: none (keep the optimizer state on the GPU), or more memory for the container "
           "(docker run --memory, the pod's resources.limits.memory)",
           what, format_bytes(bytes_needed_on_this_node), bytes_needed_on_this_node, format_bytes(m.available()),
           binding_limit(m), format_bytes(m.mem_available), cgroup,
           m.memlock ? format_bytes(*m.memlock) : std::string("unlimited"));
}

}  // namespace lf::offload
