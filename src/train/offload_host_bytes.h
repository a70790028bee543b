#pragma once
// What offload will page-lock in host memory, predicted from the config and the model's
// config.json before anything loads (run_training checks it against MemAvailable and the
// cgroup's limit): 16 bytes a trainable parameter (fp32 master, two moments, fp32 gradient)
// over the world, times offload_ratio (the share offloaded; as many whole units as fit in it, so
// this bounds what ZeRO pins). Internal to lf_train.
#include <cstdint>

#include "lf/config/train_config.h"
#include "lf/model/config.h"

namespace lf::train {

struct OffloadHostBytes {
  double trainable = 0;  // parameters (LoRA: an upper bound, A and B on all seven projections)
  double per_rank = 0;   // bytes
};

OffloadHostBytes predict_offload_host_bytes(const config::TrainConfig& c, const model::ModelConfig& mc,
                                            int64_t world_size);

}  // namespace lf::train
