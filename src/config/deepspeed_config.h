#pragma once
// `deepspeed: FILE.json` (or an inline mapping): a DeepSpeed config read as HF's
// HfTrainerDeepSpeedConfig reads it. "auto" takes the YAML's value; an explicit value
// that contradicts the YAML is an error naming both; every key is known
// (deepspeed_keys.cpp): implemented, no effect (one warning line per file), or
// refused with the reason. Internal to src/config.
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "config_reader.h"
#include "lf/config/train_config.h"

namespace lf::config {

struct DeepSpeedSettings {
  std::string label;  // "deepspeed: ds_z3_config.json"
  int64_t stage = 0;
  std::string offload = "none";  // none | optimizer | params
  std::optional<bool> pin_memory;  // set when something is offloaded
  std::optional<double> offload_ratio;  // zero_optimization.offload_optimizer.ratio, when given
  bool overlap_comm = false;
  double reduce_bucket_mb = 0;
  double allgather_bucket_mb = 0;
  double prefetch_bucket_mb = 0;
  std::optional<int64_t> train_batch_size;
  nlohmann::json content;  // the whole file, for the cross-node config check
};

// nullopt when `deepspeed` is unset or empty. `c` holds the YAML's values already read
// (batch sizes, precision, optimizer). Throws one ConfigError listing every problem.
std::optional<DeepSpeedSettings> read_deepspeed(const Reader& r, const JobPlan& c, const std::string& config_dir,
                                                std::vector<std::string>& warnings);

}  // namespace lf::config
