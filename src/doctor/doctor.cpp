#include "lf/doctor/doctor.h"

#include <unistd.h>

#include "lf/common/env_knobs.h"
#include "lf/common/hostname.h"

namespace lf::doctor {

DoctorContext context_from_env() {
  DoctorContext ctx;
  ctx.nvml_library = knob_string("LF_NVML_LIBRARY").value_or(ctx.nvml_library);
  ctx.cuda_library = knob_string("LF_CUDA_LIBRARY").value_or(ctx.cuda_library);
  ctx.nccl_library = knob_string("LF_NCCL_LIBRARY").value_or(ctx.nccl_library);
  return ctx;
}

void run_node_checks(const DoctorContext& ctx, Report& report, NodeFacts& facts, bool all_nodes) {
  facts.hostname = this_hostname();
  facts.nproc = ctx.nproc;
  check_gpus(ctx, report, facts);
  check_system(ctx, report);
  check_nccl_network(ctx, report);
  check_master(ctx, report, all_nodes);
  check_config(ctx, report, facts);
}

}  // namespace lf::doctor
