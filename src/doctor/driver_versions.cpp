#include "lf/doctor/driver_versions.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <fstream>
#include <regex>

namespace lf::doctor {

CudaDriverInfo cuda_driver_info(const std::string& library) {
  CudaDriverInfo info;
  void* h = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    info.error = fmt::format("{} not loadable ({})", library, ::dlerror());
    return info;
  }
  using GetVersion = int (*)(int*);
  using Init = int (*)(unsigned);
  using Count = int (*)(int*);
  auto get_version = reinterpret_cast<GetVersion>(::dlsym(h, "cuDriverGetVersion"));
  auto init = reinterpret_cast<Init>(::dlsym(h, "cuInit"));
  auto count = reinterpret_cast<Count>(::dlsym(h, "cuDeviceGetCount"));
  if (!get_version || !init || !count) {
    info.error = fmt::format("{} lacks cuDriverGetVersion/cuInit: not NVIDIA's driver library?", library);
  } else {
    if (get_version(&info.version) != 0) info.version = 0;
    // cuInit honours CUDA_VISIBLE_DEVICES: the count is what the workers will see.
    if (const int r = init(0); r != 0) {
      info.error = fmt::format("cuInit failed (CUDA error {}{})", r,
                               r == 100 ? ": no CUDA device visible" : r == 999 ? ": unknown error, see dmesg" : "");
    } else if (int n = 0; count(&n) == 0) {
      info.device_count = n;
    }
  }
  ::dlclose(h);
  return info;
}

std::optional<std::string> nccl_version(const std::string& library, std::string* why) {
  void* h = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    if (why) *why = fmt::format("{} not loadable ({})", library, ::dlerror());
    return std::nullopt;
  }
  using GetVersion = int (*)(int*);
  auto get = reinterpret_cast<GetVersion>(::dlsym(h, "ncclGetVersion"));
  int v = 0;
  std::optional<std::string> out;
  if (get && get(&v) == 0) {
    // NCCL >= 2.9 encodes major*10000 + minor*100 + patch; older ones major*1000 + minor*100 + patch.
    out = v >= 10000 ? fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100)
                     : fmt::format("{}.{}.{}", v / 1000, (v % 1000) / 100, v % 100);
  } else if (why) {
    *why = fmt::format("{} has no working ncclGetVersion", library);
  }
  ::dlclose(h);
  return out;
}

std::string kernel_driver_version(const std::string& proc_root) {
  std::ifstream in(proc_root + "/driver/nvidia/version");
  std::string line;
  std::getline(in, line);
  std::smatch m;
  static const std::regex version(R"((\d+\.\d+(\.\d+)?))");
  return std::regex_search(line, m, version) ? m[1].str() : "";
}

std::string cuda_version_text(int v) { return v > 0 ? fmt::format("{}.{}", v / 1000, (v % 1000) / 10) : ""; }

}  // namespace lf::doctor
