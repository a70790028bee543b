#pragma once
// expert_model_parallel_size against the job, checked where the world and the model are both
// known: `lf-train plan` / the launcher's plan summary (plan/plan_summary.cpp) and each worker's
// start (before its strategy is built). Torch-free.
#include <cstdint>

#include "lf/config/job_plan.h"

namespace lf::config {

// ConfigError (exit 2) with the reason and what to do when the size does not fit: a dense model
// (num_experts 0), a size that does not divide the world or the experts, a size other than the
// world (the expert data-parallel groups of ep < world are not built), ZeRO (named refusal:
// the experts are not in ZeRO's units) or finetuning_type freeze (frozen experts are saved from
// the model, not gathered). No-op at size 1.
void check_expert_parallel(const JobPlan& plan, int64_t world_size, int64_t num_experts);

}  // namespace lf::config
