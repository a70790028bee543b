#pragma once
// The LF_* knobs that choose how a component runs (kernel paths, DDP's gradient routes,
// offload's streams, profiling), read once into the plan's sections: the components read
// their section, never the environment. Internal to src/config.
#include "lf/config/job_plan.h"

namespace lf::config {

// Reads the knobs into plan.model.kernels, plan.parallel, plan.optim and plan.logging.
// A knob set to a value that does not parse is a ConfigError naming it (env_knobs.h).
void resolve_plan_knobs(JobPlan& plan);

}  // namespace lf::config
