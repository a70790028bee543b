#include "lf/agent/gpu_inventory.h"

#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace lf::agent {

int visible_gpu_count(const std::optional<std::string>& cuda_visible_devices, const std::string& driver_gpus_dir) {
  std::error_code ec;
  int driver_gpus = 0;
  for (auto it = std::filesystem::directory_iterator(driver_gpus_dir, ec); !ec && it != std::filesystem::end(it);
       it.increment(ec))
    ++driver_gpus;
  if (!cuda_visible_devices) return driver_gpus;
  // CUDA stops at the first invalid entry; "-1" is the usual way to hide every GPU.
  int n = 0;
  std::stringstream ss(*cuda_visible_devices);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty() || item == "-1") break;
    ++n;
  }
  return n;
}

int visible_gpu_count_from_env(const std::string& driver_gpus_dir) {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  return visible_gpu_count(v ? std::optional<std::string>(v) : std::nullopt, driver_gpus_dir);
}

}  // namespace lf::agent
