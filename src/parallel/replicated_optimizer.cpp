#include "replicated_optimizer.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "lf/ckpt/optimizer_state.h"
#include <fmt/ranges.h>

#include "lf/common/error.h"
#include "lf/model/tensor_io.h"
#include "lf/optim/grad_utils.h"

namespace lf::parallel {
namespace fs = std::filesystem;

ReplicatedOptimizer::ReplicatedOptimizer(const StrategySetup& s) : fused_clip_(s.optim.fused_clip) {
  LF_CHECK(!s.trainable.empty(), ConfigError, "the model has no trainable parameters");
  // The optimizer's flat order: decay groups first, each at lr x 1 then lr x the LoRA+ ratio
  // (none without LoRA+: HF's two groups).
  std::vector<optim::ParamGroup> groups;
  const double ratio = s.optim.loraplus_lr_ratio == 1.0 ? 0.0 : s.optim.loraplus_lr_ratio;  // x 1: no groups of its own
  for (const bool decays : {true, false})
    for (const double scale : ratio > 0 ? std::vector<double>{1.0, ratio} : std::vector<double>{1.0}) {
      optim::ParamGroup g{{}, decays ? s.optim.weight_decay : 0.0, scale};
      for (const auto& p : s.trainable)
        if (optim::hf_decays(p.name) == decays &&
            (ratio <= 0 || (optim::loraplus_lr_scale(p.name, p.tensor->dim(), ratio) != 1.0) == (scale != 1.0))) {
          named_.emplace_back(p.name, *p.tensor);
          g.params.push_back(*p.tensor);
        }
      if (ratio <= 0 || !g.params.empty()) groups.push_back(std::move(g));
    }
  for (auto& [name, t] : named_) tensors_.push_back(t);
  optim::AdamWOptions o;
  o.lr = s.optim.learning_rate;
  o.beta1 = s.optim.adam_beta1;
  o.beta2 = s.optim.adam_beta2;
  o.eps = s.optim.adam_epsilon;
  opt_ = std::make_unique<optim::AdamW>(std::move(groups), o);
}

bool ReplicatedOptimizer::unscale(double scale) const {
  return optim::unscale_gradients(tensors_, scale);
}

double ReplicatedOptimizer::clip(double max_norm) {
  pending_clip_ = at::Tensor();
  if (!fused_clip_) return optim::clip_grad_norm(tensors_, max_norm);
  const auto norm = optim::global_grad_norm(tensors_);
  if (!norm.defined()) return 0.0;
  if (max_norm > 0) pending_clip_ = optim::clip_factor(norm, max_norm);
  return norm.item<double>();
}

void ReplicatedOptimizer::step(double lr) {
  opt_->set_lr(lr);
  opt_->step(pending_clip_);
  pending_clip_ = at::Tensor();
}

int64_t ReplicatedOptimizer::numel() const {
  int64_t n = 0;
  for (const auto& t : tensors_) n += t.numel();
  return n;
}

std::vector<std::string> ReplicatedOptimizer::save(const fs::path& dir) const {
  if (opt_->exp_avg().empty()) return {};  // before the first update: no state yet
  std::vector<std::pair<std::string, at::Tensor>> state;
  for (size_t i = 0; i < named_.size(); ++i) {
    const auto& name = named_[i].first;
    state.emplace_back(ckpt::moment_key(name, "exp_avg", 0, 0, true), opt_->exp_avg()[i]);
    state.emplace_back(ckpt::moment_key(name, "exp_avg_sq", 0, 0, true), opt_->exp_avg_sq()[i]);
  }
  model::save_tensor_file(dir / ckpt::kOptimizerFile, state);
  return {ckpt::kOptimizerFile};
}

void ReplicatedOptimizer::load(const fs::path& dir, int64_t steps) {
  const ckpt::OptimizerStateReader reader(dir);
  if (reader.empty()) return;
  std::vector<at::Tensor> m1, m2;
  for (const auto& [name, t] : named_) {
    auto a = at::empty(t.sizes(), t.options().device(at::kCPU)), b = at::empty_like(a);
    reader.read(name, "exp_avg", 0, t.numel(), a);
    reader.read(name, "exp_avg_sq", 0, t.numel(), b);
    m1.push_back(a);
    m2.push_back(b);
  }
  opt_->load_state(std::move(m1), std::move(m2), steps);
}

at::Tensor& ReplicatedOptimizer::find(const std::string& name) {
  for (auto& [n, t] : named_)
    if (n == name) return t;
  LF_THROW(ConfigError, "no trainable parameter named {}", name);
}

at::Tensor ReplicatedOptimizer::full_parameter(const std::string& name) const {
  return const_cast<ReplicatedOptimizer*>(this)->find(name);
}

void ReplicatedOptimizer::load_full_parameter(const std::string& name, const at::Tensor& value) {
  c10::NoGradGuard no_grad;
  auto& t = find(name);
  LF_CHECK(value.sizes() == t.sizes(), ConfigError, "resume: {} has shape [{}] in the checkpoint, [{}] in the model",
           name, fmt::join(value.sizes(), ", "), fmt::join(t.sizes(), ", "));
  t.copy_(value);
}

}  // namespace lf::parallel
