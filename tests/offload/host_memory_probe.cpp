// lf-host-memory-probe BYTES: check_host_memory(BYTES) in this process, for the
// real-cgroup test (cgroup_limit_test.cpp runs it inside a cgroup it made).
// Prints what it read; exits 0 when BYTES fit, 2 (ConfigError) with the message when not.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "lf/common/error.h"
#include "lf/offload/host_memory.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s BYTES\n", argv[0]);
    return 2;
  }
  try {
    const auto m = lf::offload::read_host_memory();
    std::printf("MemAvailable %s; cgroup %s; available %s\n", lf::offload::format_bytes(m.mem_available).c_str(),
                m.cgroup ? (m.cgroup->path + " " + lf::offload::format_bytes(m.cgroup->limit)).c_str() : "none",
                lf::offload::format_bytes(m.available()).c_str());
    lf::offload::check_host_memory(std::stoull(argv[1]), "probe");
    std::printf("fits\n");
    return 0;
  } catch (const lf::Error& e) {
    std::printf("%s\n", e.what());
    return e.exit_code();
  }
}
