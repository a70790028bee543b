#pragma once
// The memory limit of this process's cgroup (v2 memory.max, v1
// memory.limit_in_bytes), found through /proc/self/cgroup and
// /proc/self/mountinfo as a container sees them. A limit set on an ancestor
// binds as much as one set on the process's own cgroup, so every level from the
// process's cgroup up to the mount's root is read and the tightest is kept.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lf::offload {

struct CgroupMemoryLimit {
  std::string path;        // the cgroup directory that sets the limit
  std::string limit_file;  // "memory.max" (v2) or "memory.limit_in_bytes" (v1)
  uint64_t limit = 0;
  // memory.current / memory.usage_in_bytes minus the inactive file cache (which the
  // kernel reclaims before it OOM-kills), as docker stats and the kubelet count it.
  uint64_t in_use = 0;
  uint64_t available() const { return limit > in_use ? limit - in_use : 0; }
};

// Where the process's cgroup is described (tests point these at files of their own).
struct CgroupFiles {
  std::string proc_self_cgroup = "/proc/self/cgroup";
  std::string proc_self_mountinfo = "/proc/self/mountinfo";
};

// This process's own cgroup directory in each mounted memory hierarchy (v1 "memory", or
// cgroup2), e.g. {false, "/sys/fs/cgroup/memory/docker/abc"}.
struct MemoryCgroup {
  bool v2 = false;
  std::string dir;
};
std::vector<MemoryCgroup> process_memory_cgroups(const CgroupFiles& files = {});

// The limit with the least room left among the process's memory cgroups (v1 and v2) and
// their ancestors; nullopt when none is limited or no memory cgroup is mounted.
std::optional<CgroupMemoryLimit> tightest_cgroup_memory_limit(const CgroupFiles& files = {});

}  // namespace lf::offload
