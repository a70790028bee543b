#pragma once
// ZeRO's shared unit tables (zero_strategy.h): each unit's buffers, grouped by the role that owns
// them, and the context the three roles share. The split follows DeepSpeed's
// (partitioned_param_coordinator / parameter_offload / stage3):
//   unit gathering and prefetch (zero_gather.h)   UnitParams: stage 3's gathers, the unit hooks
//   gradient reduction (zero_reduce.h)            UnitGrads: the GradSink, reduce-scatter launch / retire
//   the sharded optimizer step (zero_optimizer.h) UnitState: AdamW over the shards, its offload
// zero_strategy.cpp builds the units and answers the strategy's calls through the three.
// Units, in forward order: 0 the embedding, 1 + i decoder layer i, the head last.
// Internal to lf_parallel. Threading: the training thread, or autograd's during backward; the
// host step's thread (HostStepPipeline) touches a host unit's UnitState and its device shard.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "host_pinning.h"
#include "host_step_pipeline.h"
#include "offload_copies.h"
#include "unit_storage.h"
#include "zero_roles.h"
#include "zero_units.h"

namespace lf::comm {
class Communicator;
}

namespace lf::parallel {

struct UnitParams {
  FlatGroup train;                      // trainable parameters (compute dtype)
  std::unique_ptr<UnitStorage> frozen;  // frozen_sharded: the frozen ones (a LoRA base); else null (replicated)
  bool refreshed = true;                // refreshes_before_forward: the full parameters hold this step's values
};

struct UnitGrads {
  at::Tensor flat;     // [train.padded] fp32: the step's sum (!grads_sharded) or this micro-step's
  at::Tensor reduced;  // grads_sharded: this micro-step's reduced shard
  comm::WorkPtr reduce;
  int64_t outstanding = 0;  // uses in this micro-step whose gradient is still due
  bool had_grad = false, launched = false;
};

struct UnitState {
  // [train.shard] fp32, this rank's shard: on the device, or (host) in host memory.
  at::Tensor master, exp_avg, exp_avg_sq, grad_shard;
  std::vector<ShardPiece> pieces;   // views of the above, one per parameter piece
  std::vector<HostPinning> pinned;  // host, pin_memory on a GPU: the four page-locked
  // device_shard: this rank's compute-dtype shard on the device, refreshed from the updated master
  // after each host step.
  at::Tensor device_shard;
  bool grad_fresh = true;  // host: no gradient in grad_shard yet this step (the first is copied, not added)
};

struct ZeroUnit {
  UnitRole role;
  UnitParams params;
  UnitGrads grads;
  UnitState state;
  bool trains() const { return !params.train.empty(); }
};

// The current step's events (ZeroStrategy::events()); every thread logs.
class ZeroEvents {
 public:
  void log(const char* what, int64_t unit);
  void clear();
  std::vector<ZeroEvent> all() const;

 private:
  mutable std::mutex mu_;
  std::vector<ZeroEvent> events_;
};

// Offload: the step's gradient norm squared, summed on the device from each host unit's reduced
// gradient before it goes down (a step of one micro-step; else the host's norm). Under fp16 the
// loss-scaled gradients' norm, scaled as the host's is.
struct DeviceNorm {
  bool enabled = true;  // ZeroRoles::device_norm (LF_OFFLOAD_DEVICE_NORM)
  bool valid = true;    // this step's sum covers every host unit's whole gradient
  at::Tensor sq;        // 0-dim double on the device, undefined before the first unit
  void reset() {
    sq = at::Tensor();
    valid = enabled;
  }
};

struct ZeroContext {
  ZeroContext(const ZeroRoles& r, comm::Communicator& c, c10::Device d) : roles(r), comm(c), device(d) {
    norm.enabled = r.device_norm;
    norm.reset();
  }
  ZeroRoles roles;
  comm::Communicator& comm;
  c10::Device device;
  std::vector<ZeroUnit> units;
  int64_t head = 0;    // the head's unit (the last)
  bool tied = false;   // the head's lm_head is the embedding (unit 0)
  ZeroEvents events;
  DeviceNorm norm;
  std::unique_ptr<OffloadCopies> copies;        // offload: the copies down and up on streams of their own
  std::unique_ptr<HostStepPipeline> pipeline;   // offload; after the units: it stops before they go

  int64_t world() const { return roles.world; }
  void log(const char* what, int64_t unit) { events.log(what, unit); }
};

}  // namespace lf::parallel
