#include "zero_roles.h"

#include <c10/core/ScalarType.h>
#include <fmt/format.h>

#include "lf/common/error.h"
#include "lf/plan/zero_comm.h"

namespace lf::parallel {

namespace {

// ZeRO shards flat element ranges of each unit; an optimizer whose update reads whole matrices
// cannot step them (ZeRO would have to gather each matrix for the step, which it does not yet).
void check_optimizer(const optim::OptimizerSpec& spec, int stage) {
  LF_CHECK(spec.shape == optim::StepShape::kElementwise, ConfigError,
           "ZeRO-{} steps each rank's flat element range of a unit's parameters (a range cuts across matrices), "
           "but the optimizer {} needs more than its elements ({}); ZeRO does not gather whole tensors for an "
           "optimizer: use zero_stage 0 (data parallel) or an elementwise optimizer (AdamW)",
           stage, spec.name, spec.why);
}

}  // namespace

ZeroRoles resolve_zero_roles(const ZeroOptions& o, int64_t world) {
  LF_CHECK(o.stage >= 1 && o.stage <= 3, ConfigError, "zero_stage {}: expected 1, 2 or 3", o.stage);
  LF_CHECK(o.offload == Offload::kNone || o.stage >= 2, ConfigError,
           "offload needs zero_stage 2 or 3 (stage 1 keeps every gradient on the device); got zero_stage {}", o.stage);
  LF_CHECK(o.offload != Offload::kParams || o.stage == 3, ConfigError,
           "offloading the parameters needs zero_stage 3 (stage {} keeps them on the device)", o.stage);
  LF_CHECK(o.offload_ratio > 0 && o.offload_ratio <= 1, ConfigError,
           "offload_ratio {}: expected a share of the trainable parameters in (0, 1]", o.offload_ratio);
  check_optimizer(o.optimizer, o.stage);
  ZeroRoles r;
  r.stage = o.stage;
  r.world = world;
  r.compute_dtype = o.compute_dtype;
  r.grads_sharded = o.stage >= 2;
  r.params_gathered_on_use = o.stage == 3;
  r.frozen_sharded = o.stage == 3;
  r.offload = o.offload;
  r.pin_memory = o.host.pin_memory;
  r.device_norm = o.host.device_norm;
  r.copy_streams = o.host.copy_streams;
  return r;
}

UnitRole unit_role(const ZeroRoles& r, bool host) {
  UnitRole u;
  u.host = host;
  u.direct_grads = r.world == 1 && r.grads_sharded && !host;
  u.local_gather = r.world == 1 && !host;
  u.device_shard = host && r.offload == Offload::kOptimizer;
  return u;
}

void resolve_comm_depths(ZeroRoles& r, const ZeroOptions& o, int64_t largest_gathered_bytes,
                         int64_t largest_trainable, int64_t units) {
  plan::ZeroCommInputs in;
  in.stage = r.stage;
  in.prefetch_bucket_mb = o.comm.prefetch_bucket_mb;
  in.reduce_bucket_mb = o.comm.reduce_bucket_mb;
  in.allgather_bucket_mb = o.comm.allgather_bucket_mb;
  in.overlap_comm = o.comm.overlap_comm;
  in.compute_bytes = static_cast<int64_t>(c10::elementSize(r.compute_dtype));
  in.largest_gathered_bytes = largest_gathered_bytes;
  in.largest_trainable = largest_trainable;
  in.units = units;
  const auto d = plan::zero_comm_depths(in);
  r.prefetch_units = d.prefetch_units;
  r.reductions_in_flight = d.reductions_in_flight;
  r.update_gathers_in_flight = d.update_gathers_in_flight;
}

std::string describe_comm(const ZeroRoles& r) {
  std::string s;
  if (r.params_gathered_on_use)
    s += r.prefetch_units > 0 ? fmt::format("prefetch {} unit{} ahead (prefetch_bucket_mb)", r.prefetch_units,
                                            r.prefetch_units == 1 ? "" : "s")
                              : "no prefetch (prefetch_bucket_mb 0)";
  else
    s += fmt::format("{} update all-gather{} in flight (allgather_bucket_mb)", r.update_gathers_in_flight,
                     r.update_gathers_in_flight == 1 ? "" : "s");
  s += r.reductions_in_flight > 0
           ? fmt::format(", {} reductions in flight (reduce_bucket_mb, overlap_comm)", r.reductions_in_flight)
           : ", each reduction waited for as it is issued (overlap_comm false)";
  return s;
}

}  // namespace lf::parallel
