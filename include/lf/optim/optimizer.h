#pragma once
// The optimizer registry (DESIGN "Optimizer per file"): each optimizer is one file under src/optim/ that
// registers a name, its OptimizerSpec (whether any flat element range steps on its own, so that ZeRO may
// shard its state, or it reads whole matrices) and a factory, by one line in optimizer_registry.cpp.
// The single-process and data-parallel strategies (parallel/replicated_optimizer.h) hold an Optimizer over
// the full trainable parameters; ZeRO asks the spec (zero_roles.cpp) and steps AdamW on its shards.
//
// Ownership: an Optimizer holds shallow handles to the parameters (the model's TensorImpls): gradients are
// read from p.grad(), updates land in the model. Not thread-safe.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lf/optim/optimizer_options.h"
#include "lf/optim/optimizer_spec.h"

namespace lf::optim {

struct NamedTensor {
  std::string name;  // HF / PEFT name ("model.layers.0.mlp.up_proj.weight")
  at::Tensor tensor;
};

// What a factory gets: the trainable parameters in model order and the plan's settings.
struct OptimizerInputs {
  std::vector<NamedTensor> params;
  double learning_rate = 1e-3;
  double weight_decay = 0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double loraplus_lr_ratio = 0;  // LoRA+ (adamw only); 0: off
  bool fused = true;             // AdamW: the fused multi-tensor kernel on CUDA
  OptimizerOptions options;
  // The model's shape (Adam-mini's heads).
  int64_t hidden_size = 0, num_attention_heads = 0, num_key_value_heads = 0;
  int64_t world = 1;  // ranks holding replicas (DDP); the refusals that depend on it
};

// One state tensor of one parameter, for checkpoints (ckpt/optimizer_state.h names it "<param>.<moment>").
struct StateTensor {
  std::string param;
  std::string moment;  // "exp_avg", "exp_avg_sq", "momentum_buffer", "galore_proj", ...
  at::Tensor tensor;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string_view name() const = 0;
  virtual void set_lr(double lr) = 0;
  // One update from the current gradients (multiplied first by grad_factor when defined: clipping's
  // factor, grad_utils.h clip_factor); steps() counts them.
  virtual void step(const at::Tensor& grad_factor = at::Tensor()) = 0;
  // Sets every gradient to undefined (torch's set_to_none).
  virtual void zero_grad() = 0;
  virtual int64_t steps() const = 0;
  // LLaMA-Factory's layer-wise GaLore / APOLLO step each parameter in backward: the trainer's clipping
  // then sees no gradient (logged grad_norm 0, nothing clipped). The strategy asks this.
  virtual bool clips() const { return true; }
  // Before the step's gradient norm: an optimizer that trains a subset drops the others' gradients here, so
  // that the norm and the clipping see only its own (BAdam's active layer).
  virtual void before_clip() {}
  // The state to checkpoint (empty before the first step) and its restore: `read(param, moment, out)` fills
  // `out` (the tensor of state() after a step, allocated by the optimizer) from the checkpoint.
  virtual std::vector<StateTensor> state() const = 0;
  using StateRead = std::function<void(const std::string& param, const std::string& moment, at::Tensor out)>;
  virtual void load_state(const StateRead& read, int64_t steps) = 0;
};

struct OptimizerEntry {
  std::string_view name;  // optimizer_name(): "adamw", "muon", ...
  OptimizerSpec spec;
  std::unique_ptr<Optimizer> (*make)(const OptimizerInputs& in);
};

// Every registered optimizer (optimizer_registry.cpp).
const std::vector<OptimizerEntry>& optimizer_registry();
// The entry of `name`; ConfigError naming the registered ones otherwise.
const OptimizerEntry& find_optimizer(std::string_view name);
// The spec of the optimizer `options` choose (for ZeRO; torch-free callers use optimizer_name first).
const OptimizerSpec& optimizer_spec(const OptimizerOptions& options, bool loraplus);
// Builds the optimizer `in.options` choose (ConfigError for a combination it refuses, with the reason).
std::unique_ptr<Optimizer> make_optimizer(const OptimizerInputs& in);

}  // namespace lf::optim
