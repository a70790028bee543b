#pragma once
// Driver, CUDA and NCCL versions without linking either: dlopen libcuda (cuDriverGetVersion,
// cuDeviceGetCount) and libnccl (ncclGetVersion), and the kernel driver's /proc file.
#include <optional>
#include <string>

namespace lf::doctor {

struct CudaDriverInfo {
  int version = 0;      // 12040
  int device_count = -1;  // -1: cuInit failed
  std::string error;    // why not, when version == 0 or device_count < 0
};

CudaDriverInfo cuda_driver_info(const std::string& library);
// "2.21.5", or nullopt and why.
std::optional<std::string> nccl_version(const std::string& library, std::string* why);
// /proc/driver/nvidia/version's "NVRM version: ... 550.54.15 ..." -> "550.54.15".
std::string kernel_driver_version(const std::string& proc_root);
// 12040 -> "12.4"
std::string cuda_version_text(int v);

}  // namespace lf::doctor
