// Built without the shared PCH: LF_WITH_CUDA is defined for this file only.
#include "lf/worker/device.h"

#include <ATen/Context.h>

#include "lf/common/error.h"

#ifdef LF_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>
#endif

namespace lf::worker {

c10::Device pick_device(const std::string& requested) {
  if (requested == "cpu") return c10::Device(c10::DeviceType::CPU);
  const bool cuda = at::hasCUDA();
  LF_CHECK(cuda || requested != "cuda", ConfigError, "--device cuda asked for, but no GPU is visible to this build");
  return cuda ? c10::Device(c10::DeviceType::CUDA, 0) : c10::Device(c10::DeviceType::CPU);
}

void device_synchronize(const c10::Device& device) {
#ifdef LF_WITH_CUDA
  if (device.is_cuda()) c10::cuda::device_synchronize();
#endif
}

void reset_peak_memory(const c10::Device& device) {
#ifdef LF_WITH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#endif
}

int64_t peak_memory_bytes(const c10::Device& device) {
#ifdef LF_WITH_CUDA
  if (device.is_cuda()) {
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return stats.allocated_bytes[0].peak;  // [0]: StatType::AGGREGATE (its namespace moved between releases)
  }
#endif
  return 0;
}

std::string device_name(const c10::Device& device) {
#ifdef LF_WITH_CUDA
  if (device.is_cuda()) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, device.index()) == cudaSuccess) return prop.name;
  }
#endif
  return device.str();
}

}  // namespace lf::worker
