#pragma once
// What a run will need, from the config and the model's config.json alone (no weights
// read, no torch): parameters, the bytes one checkpoint writes, and a rough GPU memory
// per rank. Estimates for a preflight: doctor warns on them, never fails on GPU memory.
#include <cstdint>
#include <filesystem>
#include <string>

#include "lf/config/train_config.h"

namespace lf::doctor {

struct ResourceEstimate {
  int64_t parameters = 0;
  int64_t trainable = 0;
  double checkpoint_bytes = 0;  // trainable x (4 fp32 weight + 8 AdamW moments)
  double gpu_weights_bytes = 0, gpu_optimizer_bytes = 0, gpu_activation_bytes = 0;
  double gpu_total_bytes() const { return gpu_weights_bytes + gpu_optimizer_bytes + gpu_activation_bytes; }
};

// ConfigError naming config.json when it lacks the sizes. world: ranks sharing ZeRO shards.
ResourceEstimate estimate_resources(const config::TrainConfig& c, const std::filesystem::path& config_json,
                                    int64_t world);

}  // namespace lf::doctor
