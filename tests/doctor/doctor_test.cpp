// lf-train doctor's checks in-process where the machine allows (real /dev/shm, rlimits,
// interfaces, a port held by this test), and against a sysfs tree of our own for
// InfiniBand (no HCA here). The multi-node and namespace cases are in
// tests/launcher/test_doctor.py.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lf/doctor/doctor.h"
#include "lf/doctor/net_probe.h"

namespace lf::doctor {
namespace {

namespace fs = std::filesystem;

const CheckResult* find(const Report& r, const std::string& check) {
  for (const auto& c : r.results())
    if (c.check == check) return &c;
  return nullptr;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

struct FakeSys {
  fs::path root = fs::temp_directory_path() / fmt::format("lf-doctor-sys-{}", ::getpid());
  FakeSys() {
    fs::remove_all(root);
    port("mlx5_0", 1, "4: ACTIVE");
    port("mlx5_1", 1, "2: INIT");
    for (const char* i : {"lo", "eth0", "ens5"}) {
      fs::create_directories(root / "class/net" / i);
      std::ofstream(root / "class/net" / i / "operstate") << (std::string(i) == "ens5" ? "down\n" : "up\n");
    }
  }
  ~FakeSys() { fs::remove_all(root); }
  void port(const std::string& hca, int p, const std::string& state) {
    const fs::path d = root / "class/infiniband" / hca / "ports" / std::to_string(p);
    fs::create_directories(d / "counters");
    std::ofstream(d / "state") << state << "\n";
    std::ofstream(d / "link_layer") << "InfiniBand\n";
  }
};

Report network_report(const FakeSys& sys, const char* ifname, const char* hca) {
  if (ifname) ::setenv("NCCL_SOCKET_IFNAME", ifname, 1);
  else ::unsetenv("NCCL_SOCKET_IFNAME");
  if (hca) ::setenv("NCCL_IB_HCA", hca, 1);
  else ::unsetenv("NCCL_IB_HCA");
  DoctorContext ctx;
  ctx.sys_root = sys.root.string();
  Report r;
  check_nccl_network(ctx, r);
  ::unsetenv("NCCL_SOCKET_IFNAME");
  ::unsetenv("NCCL_IB_HCA");
  return r;
}

TEST(DoctorNetwork, SocketIfnameThatMatchesNothingFails) {
  FakeSys sys;
  auto r = network_report(sys, "eth9", nullptr);
  auto* c = find(r, "nccl-ifname");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->verdict, Verdict::kFail);
  EXPECT_TRUE(contains(c->detail, "NCCL_SOCKET_IFNAME=eth9 matches no interface")) << c->detail;
  EXPECT_TRUE(contains(c->detail, "(interfaces: ens5, eth0, lo)")) << c->detail;
  r = network_report(sys, "eth,bond", nullptr);  // a prefix list where one name is a typo
  EXPECT_EQ(find(r, "nccl-ifname")->verdict, Verdict::kWarn);
  EXPECT_TRUE(contains(find(r, "nccl-ifname")->detail, "'bond' matches nothing")) << find(r, "nccl-ifname")->detail;
  r = network_report(sys, "=ens5", nullptr);  // exists but down
  EXPECT_TRUE(contains(find(r, "nccl-ifname")->detail, "ens5 is down"));
  r = network_report(sys, "eth0", nullptr);
  EXPECT_EQ(find(r, "nccl-ifname")->verdict, Verdict::kPass);
}

TEST(DoctorNetwork, IbHcaNamesAndPortStatesFromSysfs) {
  FakeSys sys;
  auto r = network_report(sys, nullptr, "mlx5_0:1");
  EXPECT_EQ(find(r, "ib-ports")->verdict, Verdict::kPass) << find(r, "ib-ports")->detail;
  r = network_report(sys, nullptr, "mlx5_1");  // INIT: no subnet manager
  EXPECT_EQ(find(r, "ib-ports")->verdict, Verdict::kFail);
  EXPECT_TRUE(contains(find(r, "ib-ports")->detail, "mlx5_1:1 (2: INIT")) << find(r, "ib-ports")->detail;
  r = network_report(sys, nullptr, "mlx5_7:1");
  EXPECT_EQ(find(r, "nccl-ib-hca")->verdict, Verdict::kFail);
  EXPECT_TRUE(contains(find(r, "nccl-ib-hca")->detail, "mlx5_7:1 not found")) << find(r, "nccl-ib-hca")->detail;
  r = network_report(sys, nullptr, "^mlx5_1");  // exclusion: only mlx5_0 is used, and it is active
  EXPECT_EQ(find(r, "ib-ports")->verdict, Verdict::kPass);
  ::setenv("NCCL_IB_DISABLE", "1", 1);
  r = network_report(sys, nullptr, nullptr);
  ::unsetenv("NCCL_IB_DISABLE");
  EXPECT_EQ(find(r, "nccl-ib-disable")->verdict, Verdict::kWarn);
}

TEST(DoctorSystem, ShmAndLimitsAreReported) {
  DoctorContext ctx;
  ctx.nproc = 8;
  Report r;
  check_system(ctx, r);
  ASSERT_TRUE(find(r, "shm"));
  EXPECT_TRUE(contains(find(r, "shm")->detail, "/dev/shm is")) << find(r, "shm")->detail;
  EXPECT_TRUE(find(r, "memlock"));
  EXPECT_TRUE(find(r, "nofile"));
  ctx.shm_path = "/no/such/shm";
  Report missing;
  check_system(ctx, missing);
  EXPECT_EQ(find(missing, "shm")->verdict, Verdict::kFail);
}

TEST(DoctorMaster, PortInUseOnNodeZeroNamesTheProcess) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ::listen(fd, 1);
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  DoctorContext ctx;
  ctx.nnodes = 2;
  ctx.node_rank = 0;
  ctx.master_port = ntohs(a.sin_port);
  Report r;
  check_master(ctx, r, false);
  const auto* c = find(r, "master-port");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->verdict, Verdict::kFail);
  EXPECT_TRUE(contains(c->detail, fmt::format("pid {} (doctor_test)", ::getpid()))) << c->detail;
  ::close(fd);
  Report free;
  check_master(ctx, free, false);
  EXPECT_EQ(find(free, "master-port")->verdict, Verdict::kPass);
}

TEST(DoctorMaster, UnresolvableAddressFails) {
  DoctorContext ctx;
  ctx.master_addr = "no-such-host.invalid";
  ctx.nnodes = 2;
  ctx.node_rank = 1;
  Report r;
  check_master(ctx, r, false);
  EXPECT_EQ(find(r, "master-addr")->verdict, Verdict::kFail);
  EXPECT_TRUE(contains(find(r, "master-addr")->detail, "does not resolve"));
}

TEST(DoctorReport, TextAndJson) {
  Report r;
  r.pass("a", "fine");
  r.fail("b", "broken", "fix it");
  const std::string t = r.text("header");
  EXPECT_TRUE(contains(t, "PASS  a                fine\n")) << t;
  EXPECT_TRUE(contains(t, "FAIL  b                broken\n")) << t;
  EXPECT_TRUE(contains(t, "-> fix it")) << t;
  EXPECT_TRUE(contains(t, "1 PASS, 0 WARN, 1 FAIL")) << t;
  const auto j = nlohmann::json::parse(r.json("0", "h"));
  EXPECT_FALSE(j["ok"].get<bool>());
  EXPECT_EQ(j["checks"][1]["status"], "FAIL");
  EXPECT_EQ(j["checks"][1]["fix"], "fix it");
}

}  // namespace
}  // namespace lf::doctor
