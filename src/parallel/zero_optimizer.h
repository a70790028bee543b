#pragma once
// ZeRO's sharded optimizer step and its offload (DeepSpeed's stage3 step / ZeRO-Offload): AdamW
// (HF's decay groups, LoRA+) over this rank's pieces of each unit's shard, the fp32 master and
// moments beside the gradient shard; the global norm and the fp16 overflow flag reduced over
// shards; the moments saved and loaded by parameter and element range (ckpt/optimizer_state.h).
// Offloaded units (UnitRole::host) keep that state in host memory (page-locked on a GPU run when
// pin_memory) and step on HostStepPipeline's thread, unit by unit in forward order, each unit's
// updated compute-dtype shard going up to the device as the host moves on (offload_copies.h);
// their unscale and clip factors are applied inside the host step, not in passes of their own,
// and in a step of one micro-step the norm comes from the device (DeviceNorm, zero_unit_table.h).
// Internal to lf_parallel. Threading: the training thread; the host step on the pipeline's.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lf/offload/host_adamw.h"
#include "lf/optim/adamw.h"
#include "lf/parallel/strategy.h"
#include "zero_unit_table.h"

namespace lf::parallel {

class ShardedOptimizer {
 public:
  ShardedOptimizer(ZeroContext& z, const StrategySetup& s, const ZeroOptions& o);

  // The unit's state from its fp32 values ([train.padded], rank 0's): master, moments and gradient
  // shard where its role puts them, and its pieces.
  void add_unit(ZeroUnit& u, const at::Tensor& values);

  // fp16: divides the gradients by `scale`; true when any rank's held an inf or a NaN.
  bool unscale(double scale);
  // The global norm (clip_grad_norm in strategy.h).
  double clip(double max_norm);
  // The units on the device (after the last host step is done).
  void step_device(double lr);
  // Offload: the host units on the pipeline's thread; returns at once.
  void start_host_step(double lr);
  void zero_grad();
  int64_t steps() const { return steps_; }

  std::vector<std::string> save(const std::filesystem::path& dir, int64_t rank) const;
  void load(const std::filesystem::path& dir, int64_t steps);

 private:
  // The gradient shards of the units on the host (true) or on the device (false), or of all.
  std::vector<at::Tensor> grad_shards(std::optional<bool> host = std::nullopt) const;
  void host_update(ZeroUnit& u, double lr, double grad_scale, int64_t step);
  void stage_up(int64_t unit);

  ZeroContext& z_;
  double weight_decay_;
  double loraplus_;  // LoRA+ ratio (0: off)
  optim::AdamWOptions adam_;
  std::unique_ptr<offload::HostThreadPool> pool_;  // offload: the host AdamW's threads
  double grad_scale_ = 1.0;  // offload: the unscale and clip factors, applied inside the steps
  int64_t steps_ = 0;
};

}  // namespace lf::parallel
