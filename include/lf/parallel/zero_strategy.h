#pragma once
// ZeRO-1/2/3 (FSDP-style sharding; DeepSpeed's stages), a ParallelStrategy (strategy.h).
// The model's parameters are regrouped into flat per-unit buffers (model/unit_hooks.h: the
// embedding, each decoder layer, the head), each padded to a multiple of the world size and
// split in equal shards, rank r owning shard r (llm.c's zero_stage + shard offsets). Per rank:
//   stage 1: fp32 master weights and AdamW moments of its shards; full compute-dtype
//            parameters; full fp32 gradients accumulated locally over the step's micro-steps
//            and reduce-scattered on the last one (overlapping backward, unit by unit).
//   stage 2: + gradients reduce-scattered every micro-step as soon as a unit's are complete,
//            each rank keeping only its shard (summed over micro-steps).
//   stage 3: + parameters sharded: a unit is all-gathered before its forward (the next ones
//            prefetched while it computes), freed after, gathered again before its backward
//            (the previous ones prefetched), freed once its backward is over. The trainable
//            parameters' gather input is the fp32 master shard cast to the compute dtype, so
//            no compute-dtype shard is kept: 16 bytes per parameter over N ranks (4 master +
//            8 moments + 4 fp32 gradient shard) plus the gathered units.
// After each update the new compute-dtype parameters are all-gathered (stages 1, 2). The
// gradient norm and the fp16 overflow flag are reduced over shards; checkpoints hold each
// rank's moment ranges (ckpt/optimizer_state.h), so a run resumes at any world size and stage.
// LoRA: the frozen base is sharded under stage 3 only (replicated otherwise), stored as its
// number format declares (src/parallel/unit_storage.h); only the adapters have master weights,
// gradients and optimizer state. The optimizer must step flat element ranges
// (optim/optimizer_spec.h): one that needs whole matrices is refused.
#include <ATen/core/Tensor.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "lf/optim/optimizer_spec.h"
#include "lf/parallel/strategy.h"

namespace lf::parallel {

// ZeRO-Offload (stages 2 and 3): the fp32 master shards, moments and gradient shards in host
// memory (pinned on a GPU run) and the AdamW step on the host (offload/host_adamw.h), each
// unit's reduced gradient copied device -> host as its backward finishes, its updated
// compute-dtype shard host -> device as the host moves on to the next unit, both on copy streams
// of their own (offload_copies.h). kParams (stage 3) also keeps the compute-dtype parameter shards
// on the host: each gather copies its unit up. ZeroOptions::offload_ratio < 1 offloads only some
// units (ZeRO-Offload++); the others keep their state on the device and step there.
enum class Offload { kNone, kOptimizer, kParams };

// DeepSpeed's communication keys (the plan's parallel section), in MiB of the compute dtype
// (DeepSpeed counts elements). ZeRO moves whole units, so each resolves into a count of units
// (plan/zero_comm.h), printed in describe():
//   prefetch_bucket_mb (stage3_prefetch_bucket_size): stage 3 gathers as many units ahead as fit
//     (at least one; 0: no prefetch);
//   reduce_bucket_mb (reduce_bucket_size): stages 2, 3 keep as many units' reductions in flight as
//     their fp32 gradients fit (at least two);
//   allgather_bucket_mb (allgather_bucket_size): stages 1, 2 keep as many of the update's
//     all-gathers in flight as fit (at least one);
//   overlap_comm: false waits for each reduction as it is issued (no overlap with backward).
struct ZeroComm {
  double prefetch_bucket_mb = 25;
  double reduce_bucket_mb = 25;
  double allgather_bucket_mb = 25;
  bool overlap_comm = true;
};

// Where offloaded state lives and how it moves (the plan's pin_memory and LF_OFFLOAD_* knobs).
struct ZeroHostMemory {
  bool pin_memory = true;    // page-locked (a GPU run); false: pageable host memory
  bool device_norm = true;   // LF_OFFLOAD_DEVICE_NORM: one micro-step's norm summed on the device
  bool copy_streams = true;  // LF_OFFLOAD_COPY_STREAMS: the copies on streams of their own
};

struct ZeroOptions {
  int stage = 1;                              // 1, 2 or 3
  at::ScalarType compute_dtype = at::kFloat;  // the parameters' dtype in the model
  Offload offload = Offload::kNone;
  int host_threads = 1;                       // offload: the host AdamW's threads
  // offload: the share of the trainable parameters whose state and step go to the host
  // (DeepSpeed's offload_optimizer.ratio): as many whole units as fit, from the head down;
  // the others keep theirs on the device and step there (16 bytes a parameter more there).
  double offload_ratio = 1.0;
  ZeroComm comm;
  ZeroHostMemory host;  // offload
  // The optimizer ZeRO shards the state of: an elementwise one steps this rank's element ranges;
  // one that needs whole matrices is refused with the reason (ZeRO does not gather for it yet).
  optim::OptimizerSpec optimizer = optim::kAdamWSpec;
};

// Bytes this rank holds for training state (not activations), by kind.
struct ZeroMemory {
  int64_t params = 0;        // compute-dtype parameters resident between uses (stage 3: frozen shards)
  int64_t grads = 0;         // fp32 gradients (stage 1: full; 2, 3: shards)
  int64_t master = 0;        // fp32 master shards
  int64_t moments = 0;       // AdamW exp_avg + exp_avg_sq shards
  int64_t largest_unit = 0;  // stage 3: the largest gathered unit (compute dtype), the transient peak
  int64_t host = 0;          // offload: of the above, the bytes in host memory
  int64_t pinned = 0;        // offload: of host, the bytes page-locked (a GPU run, pin_memory)
  int64_t total() const { return params + grads + master + moments; }
};

// What happened when, for tests (overlap) and profiling; the current step's events.
struct ZeroEvent {
  std::string what;  // gather_start, gather_done, forward_begin, forward_end, backward_begin, backward_end,
                     // reduce_start, reduce_done, release, backward_returned, update_gather_start,
                     // update_gather_done (stages 1, 2: the step's new parameters), grad_norm_device /
                     // grad_norm_host (offload: where max_grad_norm's norm was summed)
  int64_t unit = -1;
  std::chrono::steady_clock::time_point t;
};

class ZeroStrategy : public ParallelStrategy {
 public:
  // This rank's resident bytes, summed from the tensors it actually holds.
  virtual ZeroMemory resident_bytes() const = 0;
  // The same by the ZeRO formula from the parameter counts (for the log and the test).
  virtual ZeroMemory predicted_bytes() const = 0;
  virtual std::vector<ZeroEvent> events() const = 0;

 protected:
  using ParallelStrategy::ParallelStrategy;
};

std::unique_ptr<ZeroStrategy> make_zero_strategy(StrategySetup setup, const ZeroOptions& options);

}  // namespace lf::parallel
