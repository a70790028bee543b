#pragma once
// AdamW as torch.optim.AdamW computes it (HF Trainer's default "adamw_torch"):
//   p *= 1 - lr * wd;  m = lerp(m, g, 1 - b1);  v = b2 v + (1 - b2) g^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// On CUDA the fused multi-tensor kernel (aten::_fused_adamw_) runs the same math.
//
// Ownership: holds shallow handles to the parameters (same TensorImpl as the
// model's), so gradients are read from p.grad() and updates land in the model.
// Parameters whose grad is undefined at step() are left untouched (as torch does).
// Not thread-safe.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "lf/optim/optimizer.h"

namespace lf::optim {

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  bool fused = true;  // use aten::_fused_adamw_ on CUDA parameters
};

struct ParamGroup {
  std::vector<at::Tensor> params;
  double weight_decay = 0.0;
  double lr_scale = 1.0;  // this group's learning rate is lr x lr_scale (LoRA+)
  std::vector<std::string> names;  // the params' names (checkpoint keys); empty: "group<g>.param<k>"
};

// HF's rule for which parameters decay: not biases and not norm weights (names
// matching bias | layernorm | rmsnorm | (^|.)norm($|.) | _norm($|.), lower-cased).
bool hf_decays(const std::string& hf_name);

// LLaMA-Factory's LoRA+ groups (loraplus_lr_ratio): lora_B matrices and any 1-D trainable
// parameter learn at learning_rate x ratio, the rest at learning_rate. ratio <= 0 (unset): 1.
double loraplus_lr_scale(const std::string& hf_name, int64_t ndim, double ratio);

// One AdamW update (step is the 1-based count after this update) of params from grads, with
// their moments, all lists of equal length and matching shapes; the math above, fused on CUDA.
// What AdamW::step runs per group; a sharded strategy calls it on its own shard pieces.
// grad_factor (0-dim fp32 on the grads' device, optional): the grads are first multiplied by it
// in place (clipping's factor, clip_factor in grad_utils.h): inside the fused CUDA kernel (which
// divides by 1 / factor: within an ulp of the product), else by torch's _foreach_mul_.
void adamw_update(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
                  const std::vector<at::Tensor>& exp_avg, const std::vector<at::Tensor>& exp_avg_sq, int64_t step,
                  double lr, double weight_decay, const AdamWOptions& options,
                  const at::Tensor& grad_factor = at::Tensor());

class AdamW final : public Optimizer {
 public:
  AdamW(std::vector<ParamGroup> groups, const AdamWOptions& options);

  std::string_view name() const override { return "adamw"; }
  void set_lr(double lr) override { options_.lr = lr; }
  double lr() const { return options_.lr; }
  // One update from the current gradients (multiplied first by grad_factor when defined:
  // adamw_update); steps() counts them.
  void step(const at::Tensor& grad_factor = at::Tensor()) override;
  void zero_grad() override;  // sets every grad to undefined (set_to_none, torch's default)
  int64_t steps() const override { return step_; }
  // exp_avg / exp_avg_sq of each parameter, named by ParamGroup::names.
  std::vector<StateTensor> state() const override;
  void load_state(const StateRead& read, int64_t steps) override;

  const std::vector<ParamGroup>& groups() const { return groups_; }
  // Moment buffers in group order (for checkpoints); created lazily at the first step.
  std::vector<at::Tensor>& exp_avg() { return exp_avg_; }
  std::vector<at::Tensor>& exp_avg_sq() { return exp_avg_sq_; }
  // Restores moments (group order, shapes of the parameters) and the step count (resume).
  void load_state(std::vector<at::Tensor> exp_avg, std::vector<at::Tensor> exp_avg_sq, int64_t steps);

 private:
  void init_state();
  std::string param_name(size_t group, size_t k) const;

  std::vector<ParamGroup> groups_;
  AdamWOptions options_;
  int64_t step_ = 0;
  std::vector<at::Tensor> exp_avg_, exp_avg_sq_;  // flat over groups
};

}  // namespace lf::optim

namespace lf::optim {
// The registry's "adamw": HF's groups (decay unless a bias or a norm weight, hf_decays), LoRA+ (lora_B and
// 1-D trainables at lr x loraplus_lr_ratio), in the flat order decay groups first.
std::unique_ptr<Optimizer> make_adamw(const OptimizerInputs& in);
}  // namespace lf::optim
