// Host memory check: this machine's real MemAvailable / RLIMIT_MEMLOCK, and the
// cgroup discovery against file trees laid out as cgroup v1 and v2 mounts
// (the real-cgroup test is cgroup_limit_test.cpp).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "lf/common/error.h"
#include "lf/offload/host_memory.h"

namespace lf::offload {
namespace {

namespace fs = std::filesystem;

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(HostMemory, FormatBytes) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(64ull << 20), "64.0 MiB");
  EXPECT_EQ(format_bytes(24ull << 30), "24.0 GiB");
  EXPECT_EQ(format_bytes(1ull << 50), "1.0 PiB");
}

TEST(HostMemory, ThisMachine) {
  const HostMemory m = read_host_memory();
  EXPECT_GT(m.mem_available, 16ull << 20);
  EXPECT_LE(m.available(), m.mem_available);
  rlimit r{};
  ASSERT_EQ(getrlimit(RLIMIT_MEMLOCK, &r), 0);
  if (r.rlim_cur == RLIM_INFINITY) EXPECT_FALSE(m.memlock);
  else EXPECT_EQ(m.memlock.value_or(0), r.rlim_cur);
  EXPECT_NO_THROW(check_host_memory(1 << 20, "one MiB"));
}

TEST(HostMemory, MoreThanTheNodeHasIsAClearConfigError) {
  const std::string msg = message_of([] { check_host_memory(1ull << 50, "optimizer offload: 1e14 parameters"); });
  ASSERT_FALSE(msg.empty()) << "1 PiB fitted";
  EXPECT_NE(msg.find("optimizer offload: 1e14 parameters: needs 1.0 PiB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("MemAvailable"), std::string::npos) << msg;
  EXPECT_NE(msg.find("fewer workers per node"), std::string::npos) << msg;
  EXPECT_NE(msg.find("offload: none"), std::string::npos) << msg;
  EXPECT_NE(msg.find("docker run --memory"), std::string::npos) << msg;
}

// A scratch tree: tmp/{meminfo, cgroup, mountinfo, mnt/...}.
class CgroupTree : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("lf_cgroup_tree_" + std::to_string(getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    write("meminfo", "MemTotal:       24684084 kB\nMemFree:        16818080 kB\nMemAvailable:   20971520 kB\n");
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const fs::path& rel, const std::string& text) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }
  std::string mnt(const std::string& rel = "") const { return (root_ / "mnt" / rel).lexically_normal().string(); }
  HostMemorySources sources() const {
    return {(root_ / "meminfo").string(), {(root_ / "cgroup").string(), (root_ / "mountinfo").string()}};
  }
  // One mountinfo line for a mount of `fstype` at mnt/<sub> showing cgroup path `root`.
  std::string mount_line(const std::string& root, const std::string& sub, const std::string& fstype,
                         const std::string& super) const {
    return "35 25 0:30 " + root + " " + mnt(sub) + " rw,nosuid shared:9 - " + fstype + " cgroup " + super + "\n";
  }

  fs::path root_;
};

TEST_F(CgroupTree, V2LimitOnAnAncestorBindsAndTheInactiveCacheIsNotCounted) {
  write("mountinfo", "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n" + mount_line("/", "", "cgroup2", "rw,nsdelegate"));
  write("cgroup", "0::/job/worker\n");
  write("mnt/job/memory.max", "1073741824\n");           // 1 GiB
  write("mnt/job/memory.current", "629145600\n");        // 600 MiB
  write("mnt/job/memory.stat", "anon 400000000\ninactive_file 104857600\nactive_file 1\n");  // 100 MiB reclaimable
  write("mnt/job/worker/memory.max", "max\n");
  write("mnt/job/worker/memory.current", "5000\n");
  const auto limit = tightest_cgroup_memory_limit(sources().cgroup);
  ASSERT_TRUE(limit);
  EXPECT_EQ(limit->path, mnt("job"));
  EXPECT_EQ(limit->limit_file, "memory.max");
  EXPECT_EQ(limit->in_use, 500ull << 20);
  EXPECT_EQ(limit->available(), 524ull << 20);
  const auto cgroups = process_memory_cgroups(sources().cgroup);
  ASSERT_EQ(cgroups.size(), 1u);
  EXPECT_TRUE(cgroups[0].v2);
  EXPECT_EQ(cgroups[0].dir, mnt("job/worker"));

  EXPECT_NO_THROW(check_host_memory(500ull << 20, "fits", sources()));
  const std::string msg = message_of([&] { check_host_memory(600ull << 20, "optimizer state", sources()); });
  EXPECT_NE(msg.find("needs 600.0 MiB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("only 524.0 MiB is available: the cgroup " + mnt("job") + " allows 1.0 GiB (memory.max)"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("MemAvailable 20.0 GiB"), std::string::npos) << msg;
}

TEST_F(CgroupTree, V2NamespacedContainerSeesItsCgroupAsTheMountRoot) {
  // A container with its own cgroup namespace: /proc/self/cgroup says "/", the mount shows
  // the container's cgroup at the top, and the limit is set right there.
  write("mountinfo", mount_line("/", "", "cgroup2", "rw"));
  write("cgroup", "0::/\n");
  write("mnt/memory.max", "2147483648\n");
  write("mnt/memory.current", "0\n");
  const auto limit = tightest_cgroup_memory_limit(sources().cgroup);
  ASSERT_TRUE(limit);
  EXPECT_EQ(limit->path, mnt());
  EXPECT_EQ(limit->available(), 2ull << 30);
}

TEST_F(CgroupTree, V1BindMountedCgroupAndUnlimitedLevels) {
  // Docker on cgroup v1: the host's /docker/<id> bind-mounted at the mount point; the
  // process is in a child of it. LONG_MAX-ish values mean no limit.
  write("mountinfo", mount_line("/docker/abc", "memory", "cgroup", "rw,memory") +
                         mount_line("/docker/abc", "cpu", "cgroup", "rw,cpu,cpuacct") +
                         "40 25 0:40 / " + mnt("weird\\040name") + " rw - tmpfs tmpfs rw\n");
  write("cgroup", "9:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc/sub\n0::/\n");
  write("mnt/memory/memory.limit_in_bytes", "268435456\n");  // 256 MiB
  write("mnt/memory/memory.usage_in_bytes", "134217728\n");
  write("mnt/memory/memory.stat", "cache 1\ntotal_inactive_file 33554432\n");
  write("mnt/memory/sub/memory.limit_in_bytes", "9223372036854771712\n");
  write("mnt/memory/sub/memory.usage_in_bytes", "1000\n");
  const auto limit = tightest_cgroup_memory_limit(sources().cgroup);
  ASSERT_TRUE(limit);
  EXPECT_EQ(limit->path, mnt("memory"));
  EXPECT_EQ(limit->limit_file, "memory.limit_in_bytes");
  EXPECT_EQ(limit->available(), (256ull - 128 + 32) << 20);
  const std::string msg = message_of([&] { check_host_memory(1ull << 30, "params", sources()); });
  EXPECT_NE(msg.find("the cgroup " + mnt("memory") + " allows 256.0 MiB (memory.limit_in_bytes) and 96.0 MiB"),
            std::string::npos)
      << msg;
}

TEST_F(CgroupTree, TheTighterOfTwoLevelsWinsAndNoLimitMeansMemAvailable) {
  write("mountinfo", mount_line("/", "", "cgroup2", "rw"));
  write("cgroup", "0::/a/b\n");
  write("mnt/a/memory.max", "4294967296\n");   // 4 GiB, 3 GiB free
  write("mnt/a/memory.current", "1073741824\n");
  write("mnt/a/b/memory.max", "3758096384\n");  // 3.5 GiB, 3.4 GiB free: tighter than MemAvailable, looser than a
  write("mnt/a/b/memory.current", "104857600\n");
  auto limit = tightest_cgroup_memory_limit(sources().cgroup);
  ASSERT_TRUE(limit);
  EXPECT_EQ(limit->path, mnt("a"));
  fs::remove(root_ / "mnt/a/memory.max");
  fs::remove(root_ / "mnt/a/b/memory.max");
  EXPECT_FALSE(tightest_cgroup_memory_limit(sources().cgroup));
  const std::string msg = message_of([&] { check_host_memory(21ull << 30, "x", sources()); });
  EXPECT_NE(msg.find("MemAvailable in /proc/meminfo is 20.0 GiB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no cgroup memory limit"), std::string::npos) << msg;
}

TEST_F(CgroupTree, AMountThatDoesNotShowTheProcessIsNotRead) {
  // The mount shows /other (not an ancestor of the process's cgroup), and a path outside the
  // namespace ("/../x"): neither directory is the process's, so their limits are not used.
  write("mountinfo", mount_line("/other", "", "cgroup2", "rw"));
  write("cgroup", "0::/job\n");
  write("mnt/memory.max", "1048576\n");
  EXPECT_FALSE(tightest_cgroup_memory_limit(sources().cgroup));
  EXPECT_TRUE(process_memory_cgroups(sources().cgroup).empty());
  write("mountinfo", mount_line("/", "", "cgroup2", "rw"));
  write("cgroup", "0::/../x\n");
  EXPECT_FALSE(tightest_cgroup_memory_limit(sources().cgroup));
  write("cgroup", "0::/\n");
  EXPECT_TRUE(tightest_cgroup_memory_limit(sources().cgroup));  // the same file, now the process's own
}

TEST_F(CgroupTree, NoMemAvailableLineIsAnError) {
  write("meminfo", "MemTotal: 1000 kB\n");
  write("mountinfo", "");
  write("cgroup", "");
  const std::string msg = message_of([&] { read_host_memory(sources()); });
  EXPECT_NE(msg.find("no MemAvailable line"), std::string::npos) << msg;
}

}  // namespace
}  // namespace lf::offload
