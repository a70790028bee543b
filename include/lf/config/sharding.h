#pragma once
// What of the sharding config only the run can check. Torch-free.
#include <cstdint>

#include "lf/config/train_config.h"

namespace lf::config {

// DeepSpeed's explicit train_batch_size must be per_device_train_batch_size x
// gradient_accumulation_steps x world_size (HF's rule): ConfigError naming the three
// and the file otherwise. No-op when train_batch_size is "auto" or unset.
void check_world_size(const JobPlan& c, int64_t world_size);

}  // namespace lf::config
