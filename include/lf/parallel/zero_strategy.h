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
//   stage 3: + parameters sharded: a unit is all-gathered before its forward (the next one
//            prefetched while it computes), freed after, gathered again before its backward
//            (the previous one prefetched), freed once its backward is over. The trainable
//            parameters' gather input is the fp32 master shard cast to the compute dtype, so
//            no compute-dtype shard is kept: 16 bytes per parameter over N ranks (4 master +
//            8 moments + 4 fp32 gradient shard) plus the gathered units.
// After each update the new compute-dtype parameters are all-gathered (stages 1, 2). The
// gradient norm and the fp16 overflow flag are reduced over shards; checkpoints hold each
// rank's moment ranges (ckpt/optimizer_state.h), so a run resumes at any world size and stage.
// LoRA: the frozen base is sharded under stage 3 only (replicated otherwise); only the
// adapters have master weights, gradients and optimizer state.
#include <ATen/core/Tensor.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

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

struct ZeroOptions {
  int stage = 1;                              // 1, 2 or 3
  at::ScalarType compute_dtype = at::kFloat;  // the parameters' dtype in the model
  bool prefetch = true;                       // stage 3: gather the next unit while one computes
  Offload offload = Offload::kNone;
  int host_threads = 1;                       // offload: the host AdamW's threads
  // offload: the share of the trainable parameters whose state and step go to the host
  // (DeepSpeed's offload_optimizer.ratio): as many whole units as fit, from the head down;
  // the others keep theirs on the device and step there (16 bytes a parameter more there).
  double offload_ratio = 1.0;
};

// Bytes this rank holds for training state (not activations), by kind.
struct ZeroMemory {
  int64_t params = 0;        // compute-dtype parameters resident between uses (stage 3: frozen shards)
  int64_t grads = 0;         // fp32 gradients (stage 1: full; 2, 3: shards)
  int64_t master = 0;        // fp32 master shards
  int64_t moments = 0;       // AdamW exp_avg + exp_avg_sq shards
  int64_t largest_unit = 0;  // stage 3: the largest gathered unit (compute dtype), the transient peak
  int64_t host = 0;          // offload: of the above, the bytes in host memory
  int64_t total() const { return params + grads + master + moments; }
};

// What happened when, for tests (overlap) and profiling; the current step's events.
struct ZeroEvent {
  std::string what;  // gather_start, gather_done, forward_begin, forward_end, backward_begin, backward_end,
                     // reduce_start, release, backward_returned, grad_norm_device / grad_norm_host
                     // (offload: where max_grad_norm's norm was summed)
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
