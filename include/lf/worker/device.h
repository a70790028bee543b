#pragma once
// The accelerator calls lf-worker needs that differ between CPU and CUDA builds
// (synchronize, peak memory, device name). The only file that includes CUDA headers.
#include <c10/core/Device.h>

#include <cstdint>
#include <string>

namespace lf::worker {

// "cuda" when a GPU is visible and this build has CUDA, else "cpu"; or the name given.
c10::Device pick_device(const std::string& requested);
void device_synchronize(const c10::Device& device);
void reset_peak_memory(const c10::Device& device);
int64_t peak_memory_bytes(const c10::Device& device);  // 0 on CPU
std::string device_name(const c10::Device& device);

}  // namespace lf::worker
