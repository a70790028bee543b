#pragma once
// The one object the trainer talks to about distribution (DESIGN "Parallel strategies";
// the newcomer's guide is src/parallel/README.md). A strategy is attached to the
// single-device model from outside: it routes weight gradients (model/grad_sink.h), may
// see every unit's forward and backward (model/unit_hooks.h), owns the optimizer over what
// this rank holds, and answers the reductions a step needs. The trainer knows nothing of
// DDP or ZeRO: a step is
//
//   for each micro-step k of the step (the same count on every rank):
//     before_micro_step(k == last)
//     forward through unit_hooks(); backward of loss / step target count
//   after_backward()                          // communication finished
//   all_reduce_sums({loss, tokens...})        // the logged loss and the step's counters
//   unscale_gradients(scale) (fp16)           // true: some rank overflowed, skip the step
//   clip_grad_norm(max_norm)                  // the global norm, every rank the same
//   optimizer_step(lr); zero_grad()
//
// Implementations, one file each: single process (single_strategy.cpp), data parallel
// (ddp_strategy.cpp), ZeRO-1/2/3 (zero_strategy.cpp), host offload on top of ZeRO.
// Threading: every call from the training thread; hooks the strategy installs run on
// autograd's thread during backward.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lf/config/job_plan.h"
#include "lf/model/layers.h"

namespace lf::model {
class CausalLM;
class UnitHooks;
}  // namespace lf::model
namespace lf::comm {
class Communicator;
}

namespace lf::parallel {

// What a strategy needs to set itself up on a model.
struct StrategySetup {
  model::CausalLM* model = nullptr;
  // The trainable parameters with their HF / PEFT names, in model order
  // (model::trainable_parameters): the pointers are the model's own slots.
  std::vector<model::NamedParam> trainable;
  bool lora = false;
  // The plan's optimizer section: AdamW's settings, LoRA+ (optim::loraplus_lr_scale: lora_B at
  // learning_rate x ratio; <= 0: off), max_grad_norm's factor inside the fused step.
  config::OptimSection optim;
  int64_t rank = 0;
  int64_t world = 1;
  // world > 1: the job's communicator (borrowed; outlives the strategy).
  comm::Communicator* communicator = nullptr;
};

class ParallelStrategy {
 public:
  virtual ~ParallelStrategy() = default;
  // One line for the log: "data parallel: rank 0 of 2 (tcp backend, 3 gradient buckets)".
  virtual std::string describe() const = 0;
  int64_t rank() const { return rank_; }
  int64_t world() const { return world_; }

  // ---- the step
  // The hooks the model's forward calls around each unit (nullptr: none needed).
  virtual model::UnitHooks* unit_hooks() { return nullptr; }
  // Whether every rank must run every forward (its collectives live in the forward: ZeRO-3's
  // gathers): a rank with no examples in a micro-step or an evaluation round then runs one
  // on a batch without targets (zero loss, zero gradients), its RNG state kept.
  virtual bool needs_every_forward() const { return false; }
  // Before each micro-step's forward and backward; `last`: the step's final micro-step,
  // when gradients must be synchronised. A rank whose share of a short last step is empty
  // still calls it (without a backward) and must then contribute zeros.
  virtual void before_micro_step(bool last) = 0;
  // After the last micro-step's backward: every gradient this rank owns is the sum over
  // ranks (the loss is already divided by the step's global target count).
  virtual void after_backward() = 0;
  // The sums over ranks of a few host scalars, in one collective (themselves at world 1): the
  // step's loss and its counters (tokens, flos) travel together, the step's one host sync. Each
  // element is summed as if it were reduced alone (value 0 in the same order as a vector of one).
  virtual std::vector<double> all_reduce_sums(std::vector<double> values) = 0;
  double all_reduce_sum(double value) { return all_reduce_sums({value})[0]; }
  // Every rank's copy of a CPU uint8 [n] tensor (n equal on every rank), as CPU [world, n].
  virtual at::Tensor all_gather_bytes(const at::Tensor& mine) = 0;
  // fp16: divides this rank's gradients by `scale`; true when any rank's held inf/nan.
  virtual bool unscale_gradients(double scale) = 0;
  // The L2 norm of the whole gradient over every rank (before clipping; equal on every
  // rank) and, when max_norm > 0, scales the gradients by min(1, max_norm / (norm + 1e-6)).
  virtual double clip_grad_norm(double max_norm) = 0;
  // The same without a host sync where the strategy can: the norm as a 0-dim device tensor, its clipping
  // left to optimizer_step (train/step_readback.cpp reads it a step later). Undefined: this strategy
  // reads its norm on the host (clip_grad_norm); nothing was done.
  virtual at::Tensor clip_grad_norm_on_device(double /*max_norm*/) { return {}; }
  virtual void optimizer_step(double lr) = 0;
  virtual void zero_grad() = 0;
  virtual int64_t optimizer_steps() const = 0;
  // Parameters updated by this strategy (all ranks together), for the log.
  virtual int64_t num_trainable() const = 0;

  // ---- state
  // Writes this rank's optimizer state into `dir` (a checkpoint's temporary folder) and
  // returns the file names it wrote. The layout does not depend on the world size: each
  // tensor is named by its parameter and the element range it covers (ckpt/optimizer_state.h).
  virtual std::vector<std::string> save_optimizer_state(const std::filesystem::path& dir) = 0;
  // Reads what any strategy at any world size wrote into `dir` (the ranges this rank needs).
  virtual void load_optimizer_state(const std::filesystem::path& dir, int64_t steps) = 0;
  // Saving the model: the full value of trainable parameter `name` (fp32 master where the
  // strategy keeps one). When saving_is_collective(), every rank calls it for the same names
  // in the same order and only rank 0 gets a defined tensor; else only rank 0 calls it.
  virtual at::Tensor full_parameter(const std::string& name) = 0;
  virtual bool saving_is_collective() const { return false; }
  // Resume: `value` is trainable parameter `name`'s full value (any device, any float dtype).
  virtual void load_full_parameter(const std::string& name, const at::Tensor& value) = 0;

 protected:
  ParallelStrategy(int64_t rank, int64_t world) : rank_(rank), world_(world) {}

 private:
  int64_t rank_ = 0;
  int64_t world_ = 1;
};

}  // namespace lf::parallel
