#pragma once
// How many GPUs a node's workers may use, without CUDA (the agent never links
// it): CUDA_VISIBLE_DEVICES when set ("0,2,3" -> 3; "" or "-1" -> none), else
// the GPUs the NVIDIA driver lists under /proc/driver/nvidia/gpus.
#include <optional>
#include <string>

namespace lf::agent {

int visible_gpu_count(const std::optional<std::string>& cuda_visible_devices,
                      const std::string& driver_gpus_dir = "/proc/driver/nvidia/gpus");

// The same from this process's environment. CUDA_VISIBLE_DEVICES set to "" counts as set
// (no GPU), as CUDA reads it; lf::env_string would take "" for unset (every GPU).
int visible_gpu_count_from_env(const std::string& driver_gpus_dir = "/proc/driver/nvidia/gpus");

}  // namespace lf::agent
