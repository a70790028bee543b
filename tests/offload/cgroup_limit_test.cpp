// The host memory check inside a real memory cgroup: a child of this process's
// own cgroup with a 64 MiB limit (cgroup v1 memory.limit_in_bytes or v2
// memory.max, whichever this machine has), the probe program moved into it
// (or into a grandchild without a limit of its own) before it starts.
// Needs root and a writable memory hierarchy; skips (saying why) otherwise.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "lf/offload/cgroup_memory.h"

namespace lf::offload {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kLimit = 64ull << 20;

struct ProbeResult {
  int exit_code = -1;
  std::string output;
};

// Runs lf-host-memory-probe BYTES as a process that joins `cgroup` before exec.
ProbeResult probe_in(const fs::path& cgroup, uint64_t bytes) {
  const std::string procs = (cgroup / "cgroup.procs").string(), arg = std::to_string(bytes);
  int out[2];
  if (pipe(out) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(procs.c_str(), O_WRONLY);
    if (fd < 0 || write(fd, "0", 1) != 1) _exit(99);  // "0": the writing process itself
    close(fd);
    dup2(out[1], 1);
    dup2(out[1], 2);
    close(out[0]);
    execl(LF_HOST_MEMORY_PROBE, LF_HOST_MEMORY_PROBE, arg.c_str(), static_cast<char*>(nullptr));
    _exit(98);
  }
  close(out[1]);
  ProbeResult r;
  char buf[4096];
  for (ssize_t got; (got = read(out[0], buf, sizeof buf)) > 0;) r.output.append(buf, got);
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

bool write_file(const fs::path& p, const std::string& text) {
  std::ofstream f(p);
  f << text;
  f.flush();
  return static_cast<bool>(f);
}

// Made under this process's own memory cgroup, removed (children first) at the end.
class ScratchCgroups {
 public:
  ~ScratchCgroups() {
    for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it)
      if (rmdir(it->c_str()) != 0) std::fprintf(stderr, "cgroup %s left behind: %s\n", it->c_str(), strerror(errno));
  }
  bool make(const fs::path& dir) {
    if (mkdir(dir.c_str(), 0755) != 0) return false;
    dirs_.push_back(dir);
    return true;
  }

 private:
  std::vector<fs::path> dirs_;
};

TEST(RealCgroup, ProbeFailsInsideASmallCgroupAndNamesIt) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to make a cgroup";
  const auto cgroups = process_memory_cgroups();
  if (cgroups.empty()) GTEST_SKIP() << "no memory cgroup hierarchy mounted";
  // Prefer v1's memory controller if mounted (cgroup2 here may lack the memory controller).
  MemoryCgroup own = cgroups.front();
  for (const auto& c : cgroups)
    if (!c.v2) own = c;
  const char* limit_file = own.v2 ? "memory.max" : "memory.limit_in_bytes";
  if (own.v2) {
    // v2: a child gets memory.max only when its parent delegates the memory controller.
    if (!write_file(fs::path(own.dir) / "cgroup.subtree_control", "+memory"))
      GTEST_SKIP() << "cannot enable the memory controller below " << own.dir;
  }
  ScratchCgroups scratch;
  const fs::path parent = fs::path(own.dir) / ("lf-offload-test-" + std::to_string(getpid()));
  if (!scratch.make(parent)) GTEST_SKIP() << "cannot create " << parent << ": " << strerror(errno);
  ASSERT_TRUE(write_file(parent / limit_file, std::to_string(kLimit))) << parent / limit_file;
  const fs::path child = parent / "worker";
  ASSERT_TRUE(scratch.make(child)) << child << ": " << strerror(errno);
  std::printf("scratch cgroup %s (%s = 64 MiB)\n", parent.c_str(), limit_file);

  // In the limited cgroup itself: 1 GiB does not fit, 8 MiB does.
  ProbeResult r = probe_in(parent, 1ull << 30);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("probe: needs 1.0 GiB"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the cgroup " + parent.string() + " allows 64.0 MiB (" + limit_file + ")"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("fewer workers per node"), std::string::npos) << r.output;
  r = probe_in(parent, 8ull << 20);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("fits"), std::string::npos) << r.output;

  // In a child without a limit of its own: the parent's limit still binds, and is named.
  r = probe_in(child, 1ull << 30);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("the cgroup " + parent.string() + " allows 64.0 MiB"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace lf::offload
