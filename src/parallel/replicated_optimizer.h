#pragma once
// The optimizer over full, replicated trainable parameters: what the single-process and the
// data-parallel strategies share (every rank holds every parameter, its whole gradient
// and its whole optimizer state). The plan's optimizer from the registry (optim/optimizer.h:
// AdamW with HF's decay groups, Muon, GaLore, ...), clipping on the local gradients (already
// the global ones under DDP), fp16 unscaling, and the optimizer state in the world-size-free
// layout of ckpt/optimizer_state.h (each tensor covering its whole state).
// Internal to lf_parallel. Not thread-safe.
#include <ATen/core/Tensor.h>

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lf/optim/optimizer.h"
#include "lf/parallel/strategy.h"

namespace lf::parallel {

class ReplicatedOptimizer {
 public:
  explicit ReplicatedOptimizer(const StrategySetup& setup);

  // Unscale in place; true when a local gradient holds inf/nan.
  bool unscale(double scale) const;
  // Sum of squares would lose torch's rounding: the norm is torch's clip_grad_norm_. With
  // LF_FUSED_CLIP (default) the multiply is left to step() (inside the fused CUDA AdamW; on the
  // CPU the same multiply, just later): the gradients are unclipped until then.
  double clip(double max_norm);
  // clip() without reading the norm: a 0-dim device tensor; undefined without the fused clip (the
  // separate multiply of torch's clip_grad_norm_ reads the norm on the host).
  at::Tensor clip_on_device(double max_norm);
  void step(double lr);
  void zero_grad() {
    opt_->zero_grad();
    pending_clip_ = at::Tensor();
  }
  int64_t steps() const { return opt_->steps(); }
  int64_t numel() const;

  // The state file (rank 0 writes it: every rank's state is the same).
  std::vector<std::string> save(const std::filesystem::path& dir) const;
  void load(const std::filesystem::path& dir, int64_t steps);
  // Expert parallelism: each parameter here is slice `slice` of `slices` equal slices (dim 0) of
  // the whole one; its state is that element range, in optimizer-rank<slice>.safetensors.
  std::vector<std::string> save_slice(const std::filesystem::path& dir, int64_t slice) const;
  void load_slice(const std::filesystem::path& dir, int64_t steps, int64_t slice);
  at::Tensor full_parameter(const std::string& name) const;
  void load_full_parameter(const std::string& name, const at::Tensor& value);

  // In model order.
  const std::vector<std::pair<std::string, at::Tensor>>& params() const { return named_; }
  const optim::Optimizer& optimizer() const { return *opt_; }

 private:
  at::Tensor& find(const std::string& name);
  std::vector<std::pair<std::string, at::Tensor>> named_;
  std::vector<at::Tensor> tensors_;
  std::unique_ptr<optim::Optimizer> opt_;
  bool fused_clip_ = true;  // the plan's optim.fused_clip (LF_FUSED_CLIP)
  at::Tensor pending_clip_;  // clip()'s factor for the next step(), or undefined
};

}  // namespace lf::parallel
