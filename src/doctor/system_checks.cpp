// The container limits that break NCCL or RDMA with unhelpful errors: /dev/shm (Docker's
// default is 64 MB; NCCL's shared-memory transport and DataLoader-style workers need more),
// the locked-memory limit (RDMA registers memory: "unlimited" in every guide) and the
// open-files limit.
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/statvfs.h>

#include <filesystem>

#include "lf/doctor/doctor.h"
#include "lf/metrics/net_counters.h"

namespace lf::doctor {

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;
constexpr double kShmGuideBytes = 32 * kGiB;  // the guides' --shm-size for 8-GPU nodes
constexpr double kShmMinBytes = 1 * kGiB;     // below this NCCL's shm transport fails between local GPUs
constexpr rlim_t kNofileGuide = 65536;

bool has_infiniband(const std::string& sys_root) {
  return !metrics::read_ib_ports(sys_root).empty();
}

std::string limit_text(rlim_t v) { return v == RLIM_INFINITY ? "unlimited" : std::to_string(v); }

void check_shm(const DoctorContext& ctx, Report& report) {
  struct statvfs s {};
  if (::statvfs(ctx.shm_path.c_str(), &s) != 0) {
    report.fail("shm", fmt::format("{} does not exist or cannot be read", ctx.shm_path),
                "mount a tmpfs there (docker run --shm-size=32g, or --ipc=host)");
    return;
  }
  const double size = static_cast<double>(s.f_blocks) * s.f_frsize;
  const double avail = static_cast<double>(s.f_bavail) * s.f_frsize;
  const std::string seen = fmt::format("{} is {:.1f} GiB ({:.1f} GiB free)", ctx.shm_path, size / kGiB, avail / kGiB);
  if (avail < kShmMinBytes && ctx.nproc > 1)
    report.fail("shm", seen + fmt::format(": too small for {} workers on this node (NCCL's shared-memory transport "
                                          "fails with 'unable to allocate shared memory')", ctx.nproc),
                "docker run --shm-size=32g (or --ipc=host); in Kubernetes an emptyDir with medium: Memory on /dev/shm");
  else if (size < kShmGuideBytes)
    report.warn("shm", seen + ": the multi-GPU guides ask for >= 32 GiB",
                "docker run --shm-size=32g (or --ipc=host) when the job uses several GPUs per node");
  else
    report.pass("shm", seen);
}

void check_memlock(const DoctorContext& ctx, Report& report) {
  rlimit l{};
  ::getrlimit(RLIMIT_MEMLOCK, &l);
  const bool ib = has_infiniband(ctx.sys_root);
  const std::string seen = fmt::format("ulimit -l (locked memory) is {} (hard {})",
                                       l.rlim_cur == RLIM_INFINITY ? "unlimited" : fmt::format("{} KiB", l.rlim_cur / 1024),
                                       limit_text(l.rlim_max));
  if (l.rlim_cur == RLIM_INFINITY) return report.pass("memlock", seen);
  const char* ib_disable = std::getenv("NCCL_IB_DISABLE");
  if (ib && !(ib_disable && std::string(ib_disable) == "1"))
    report.fail("memlock", seen + ": InfiniBand/RoCE needs to lock (register) memory; NCCL then fails or falls back "
                                  "to TCP",
                "docker run --ulimit memlock=-1 (or `ulimit -l unlimited` / memlock unlimited in "
                "/etc/security/limits.conf)");
  else
    report.warn("memlock", seen + ": fine without RDMA; the guides set it unlimited",
                "docker run --ulimit memlock=-1 before moving to InfiniBand/RoCE");
}

void check_nofile(Report& report) {
  rlimit l{};
  ::getrlimit(RLIMIT_NOFILE, &l);
  const std::string seen = fmt::format("open files limit {} (hard {})", limit_text(l.rlim_cur), limit_text(l.rlim_max));
  if (l.rlim_cur != RLIM_INFINITY && l.rlim_cur < kNofileGuide)
    report.warn("nofile", seen + ": NCCL, data loading and many workers use many descriptors",
                "ulimit -n 1048576 (docker run --ulimit nofile=1048576:1048576)");
  else
    report.pass("nofile", seen);
}

}  // namespace

void check_system(const DoctorContext& ctx, Report& report) {
  check_shm(ctx, report);
  check_memlock(ctx, report);
  check_nofile(report);
}

}  // namespace lf::doctor
