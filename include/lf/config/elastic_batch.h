#pragma once
// The global batch of an elastic job (--nnodes MIN:MAX) across rounds of different sizes.
// A job's global batch is per_device_train_batch_size x gradient_accumulation_steps x the
// world size of its first round (LF_BASE_WORLD_SIZE, set by the agent). A later round on
// another number of ranks (a node lost, a node back) keeps it by changing the accumulation:
// accumulation x base_world / world, when that is a whole number; otherwise the round is
// refused (ConfigError, exit 2, the numbers named): training on silently another global
// batch would change the result. Torch-free; the worker applies it before anything loads.
#include <cstdint>
#include <string>

#include "lf/config/train_config.h"

namespace lf::config {

// Sets c.gradient_accumulation_steps for `world` ranks so that the global batch of
// `base_world` ranks holds; returns a line for the log ("" when nothing changed).
// base_world <= 0: not an elastic job, nothing changes.
std::string keep_elastic_global_batch(JobPlan& c, int64_t base_world, int64_t world);

}  // namespace lf::config
