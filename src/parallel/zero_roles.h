#pragma once
// What each of ZeRO's buffers does in this run, decided once from the stage, the offload, the
// world size and the DeepSpeed communication keys (llm.c's set_zero_configs + shard_at_stage):
// the rest of ZeRO asks these questions and never tests the stage.
//
//                            stage 1     stage 2      stage 3
//   gradient                 full, sum   shard        shard        (grads_sharded)
//   reduced                  last micro  every micro  every micro  (reduces_every_micro_step)
//   trainable parameters     full        full         gathered     (params_gathered_on_use)
//   frozen parameters        full        full         gathered     (frozen_sharded)
//   after the step           all-gather  all-gather   -            (gathers_after_step)
//   optimizer state          shard       shard (host) shard (host) (UnitRole::host, offload)
// Internal to lf_parallel.
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>

#include "lf/parallel/zero_strategy.h"

namespace lf::parallel {

struct ZeroRoles {
  int stage = 1;  // for messages and the log line only
  int64_t world = 1;
  at::ScalarType compute_dtype = at::kFloat;
  // ---- gradients
  // Each rank keeps only its shard of a unit's gradient, reduce-scattered every micro-step (stages
  // 2, 3); else the unit's full fp32 gradient sums the step's micro-steps and is reduce-scattered
  // on the last one (stage 1).
  bool grads_sharded = false;
  // ---- parameters
  bool params_gathered_on_use = false;  // trainable ones freed between uses, gathered by the unit hooks
  bool frozen_sharded = false;          // frozen ones (a LoRA base) too; else left replicated
  // ---- optimizer state
  Offload offload = Offload::kNone;
  bool pin_memory = true;  // offloaded state page-locked (a GPU run)
  bool device_norm = true; // offload, one micro-step: the norm summed on the device as gradients go down
  bool copy_streams = true;
  // ---- communication, in units (resolve_comm_depths: the DeepSpeed bucket keys, plan/zero_comm.h)
  int64_t prefetch_units = 0;            // stage 3: units gathered ahead of the one computing
  int64_t reductions_in_flight = 2;      // reductions issued and not yet waited for (0: each waited at once)
  int64_t update_gathers_in_flight = 1;  // stages 1, 2: the step's all-gathers issued and not waited for

  bool reduces_every_micro_step() const { return grads_sharded; }
  // Stages 1, 2: the full parameters get every rank's new shard after each step.
  bool gathers_after_step() const { return !params_gathered_on_use; }
  bool offloaded() const { return offload != Offload::kNone; }
  bool params_on_host() const { return offload == Offload::kParams; }
  // Offload at stage 2: a host unit's updated shard is gathered before its next forward.
  bool refreshes_before_forward() const { return offloaded() && !params_gathered_on_use; }
  // The strategy sees units (its collectives live in the forward).
  bool needs_unit_hooks() const { return params_gathered_on_use || refreshes_before_forward(); }
};

// Per unit, decided when the unit is built.
struct UnitRole {
  bool host = false;  // its trainable state and step on the host (offload, offload_ratio)
  // One rank, the gradient sharded, the state on the device: the shard is the whole gradient and
  // nothing is reduced, so backward adds straight into it.
  bool direct_grads = false;
  // Its gather is the fp32 master cast into the buffer (one rank, the master on the device).
  bool local_gather = false;
  // Offload of the optimizer only: a compute-dtype shard on the device, refreshed after each host
  // step (stage 3's gather input, stage 2's refresh).
  bool device_shard = false;
};

// Checks the options (ConfigError with the reason) and resolves the stage; the communication
// depths are resolve_comm_depths' once the units are known.
ZeroRoles resolve_zero_roles(const ZeroOptions& o, int64_t world);
UnitRole unit_role(const ZeroRoles& r, bool host);

// The DeepSpeed buckets as counts of units (plan::zero_comm_depths, as the memory model counts
// them): the largest unit's gathered bytes and trainable elements (padded), over `units` units.
void resolve_comm_depths(ZeroRoles& r, const ZeroOptions& o, int64_t largest_gathered_bytes,
                         int64_t largest_trainable, int64_t units);
// "prefetch 2 units ahead, 2 reductions in flight, ..." for the log line.
std::string describe_comm(const ZeroRoles& r);

}  // namespace lf::parallel
