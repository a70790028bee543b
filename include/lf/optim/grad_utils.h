#pragma once
// Gradient clipping on the global norm (torch.nn.utils.clip_grad_norm_) and
// dynamic loss scaling for fp16 (torch.amp.GradScaler's defaults and rules).
// Not thread-safe.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace lf::optim {

// The L2 norm over every defined grad of `params` (fp32), and, when max_norm > 0,
// scales every grad by min(1, max_norm / (norm + 1e-6)). Returns the norm before
// clipping (may be inf/nan; then the grads are scaled by nan, as torch does).
double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm);

// clip_grad_norm in two halves, so that the multiply can ride in the optimizer's own pass
// (AdamW::step(grad_factor)): the global norm as a 0-dim fp32 tensor on the grads' device
// (undefined when no grad is defined), and min(1, max_norm / (norm + 1e-6)) from it.
at::Tensor global_grad_norm(const std::vector<at::Tensor>& params);
at::Tensor clip_factor(const at::Tensor& norm, double max_norm);

// The grad an optimizer's step(grad_factor) updates `param` with: its .grad() multiplied in place by
// grad_factor (when defined), or undefined when the param has no grad (left untouched, as torch does).
at::Tensor factored_grad(const at::Tensor& param, const at::Tensor& grad_factor);

// Divides every defined grad of `params` by `scale` in place; true when any held inf/nan.
// One flag per device and one host sync at the end.
bool unscale_gradients(const std::vector<at::Tensor>& params, double scale);

struct LossScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

class DynamicLossScaler {
 public:
  explicit DynamicLossScaler(const LossScalerOptions& options = {}) : options_(options), scale_(options.init_scale) {}

  double scale() const { return scale_; }
  // Divides every grad by the scale in place; true when any grad holds inf/nan
  // (the optimizer step must then be skipped).
  bool unscale(const std::vector<at::Tensor>& params) const;
  // After each optimizer step (taken or skipped): backoff on overflow, growth
  // after growth_interval clean steps in a row.
  void update(bool found_inf);
  int64_t growth_tracker() const { return growth_tracker_; }
  void set_state(double scale, int64_t growth_tracker) {
    scale_ = scale;
    growth_tracker_ = growth_tracker;
  }

 private:
  LossScalerOptions options_;
  double scale_;
  int64_t growth_tracker_ = 0;
};

}  // namespace lf::optim
