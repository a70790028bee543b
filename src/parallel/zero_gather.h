#pragma once
// ZeRO's unit gathering and prefetch (DeepSpeed's partitioned_param_coordinator): the unit hooks
// (model/unit_hooks.h) that gather a stage-3 unit's parameters before its forward, prefetch the
// units after it (ZeroRoles::prefetch_units), free it after, gather it again before its backward
// and prefetch the ones before; offload's stage 2 gathers a host unit's updated shard before its
// next forward instead; stages 1 and 2 gather every rank's new shard after the step. A unit's
// gather carries its trainable group (from the fp32 master, or the device shard the host step
// refreshed) and its frozen storage's tensors (unit_storage.h), in that order on every rank.
// Internal to lf_parallel. Threading: the hooks from the training thread (forward) or autograd's
// (backward), never concurrently.
#include <cstdint>

#include "lf/model/unit_hooks.h"
#include "zero_unit_table.h"

namespace lf::parallel {

class UnitGather final : public model::UnitHooks {
 public:
  explicit UnitGather(ZeroContext& z) : z_(z) {}

  void before_forward(int64_t unit, bool recompute) override;
  void after_forward(int64_t unit, bool recompute) override;
  void before_backward(int64_t unit) override;
  void after_backward(int64_t unit) override;

  // The micro-step's end (params_gathered_on_use): every unit released.
  void release_all();
  // gathers_after_step: every rank's new shard (the device units' updated masters) into the
  // full parameters, at most update_gathers_in_flight at a time.
  void gather_updated();
  // refreshes_before_forward, after the step: the host units' full parameters are stale.
  void mark_stale();

 private:
  // Issues (and with `wait`, waits for) the unit's gather; false when a prefetch (no wait) could not
  // be issued yet (its host step is not done): the units after it are not prefetched either, so
  // the gathers go in the same order on every rank.
  bool gather(int64_t unit, bool wait);
  void gather_trainable(ZeroUnit& u, int64_t unit, bool wait);
  void start_gather_from_host(int64_t unit);
  void release(int64_t unit);
  void refresh(int64_t unit);
  void prefetch(int64_t from, int64_t step, int64_t last);

  ZeroContext& z_;
};

}  // namespace lf::parallel
