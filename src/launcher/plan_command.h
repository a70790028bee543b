#pragma once
// `lf-train plan CONFIG [key=value ...] [--json] [--no-data]`: what the job will run, resolved from
// its plan without starting anything (lf/plan/plan_summary.h), with the data counts after
// preprocessing; and the same summary (no data counts) printed by `lf-train CONFIG` once per
// node before its workers start.
#include <cstdint>
#include <string>

#include "lf/config/job_plan.h"

namespace CLI {
class App;
}

namespace lf {

void add_plan_command(CLI::App& app);

// The summary's text for a run of `plan` on nnodes x nproc ranks, or one line saying why there is
// none (config.json unreadable): never fails the run it is printed for.
std::string run_plan_summary(const config::JobPlan& plan, int64_t nnodes, int64_t nproc);

}  // namespace lf
