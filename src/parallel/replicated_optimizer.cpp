#include "replicated_optimizer.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "lf/ckpt/optimizer_state.h"
#include <fmt/ranges.h>

#include "lf/common/error.h"
#include "lf/model/causal_lm.h"
#include "lf/model/tensor_io.h"
#include "lf/optim/adamw.h"
#include "lf/optim/grad_utils.h"
#include "lf/optim/optimizer_options.h"

namespace lf::parallel {
namespace fs = std::filesystem;

namespace {

// The order the gradient norm sums the parameters in. AdamW: HF's optimizer groups (decaying first, each
// at lr x 1 then at the LoRA+ ratio), the order lf-train's AdamW runs and the bitwise fixture (issue 28)
// were made with. The registry's other optimizers: the model's order, HF's clip_grad_norm over
// model.parameters() (Muon's bf16 steps carry the difference past 1e-5 of LLaMA-Factory's losses).
std::vector<const model::NamedParam*> hf_group_order(const StrategySetup& s) {
  const double ratio = s.optim.loraplus_lr_ratio == 1.0 ? 0.0 : s.optim.loraplus_lr_ratio;
  std::vector<const model::NamedParam*> out;
  if (optim::optimizer_name(s.optim.optimizer, ratio > 0) != "adamw") {
    for (const auto& p : s.trainable) out.push_back(&p);
    return out;
  }
  for (const bool decays : {true, false})
    for (const double scale : ratio > 0 ? std::vector<double>{1.0, ratio} : std::vector<double>{1.0})
      for (const auto& p : s.trainable)
        if (optim::hf_decays(p.name) == decays &&
            (ratio <= 0 || (optim::loraplus_lr_scale(p.name, p.tensor->dim(), ratio) != 1.0) == (scale != 1.0)))
          out.push_back(&p);
  return out;
}

}  // namespace

ReplicatedOptimizer::ReplicatedOptimizer(const StrategySetup& s) : fused_clip_(s.optim.fused_clip) {
  LF_CHECK(!s.trainable.empty(), ConfigError, "the model has no trainable parameters");
  optim::OptimizerInputs in;
  for (const auto* p : hf_group_order(s)) {
    named_.emplace_back(p->name, *p->tensor);
    tensors_.push_back(*p->tensor);
    in.params.push_back({p->name, *p->tensor});
  }
  in.learning_rate = s.optim.learning_rate;
  in.weight_decay = s.optim.weight_decay;
  in.beta1 = s.optim.adam_beta1;
  in.beta2 = s.optim.adam_beta2;
  in.eps = s.optim.adam_epsilon;
  in.loraplus_lr_ratio = s.optim.loraplus_lr_ratio;
  in.options = s.optim.optimizer;
  in.world = s.world;
  if (s.model) {
    const auto& mc = s.model->config();
    in.hidden_size = mc.hidden_size;
    in.num_attention_heads = mc.num_heads;
    in.num_key_value_heads = mc.num_kv_heads;
  }
  opt_ = optim::make_optimizer(in);
}

bool ReplicatedOptimizer::unscale(double scale) const {
  return optim::unscale_gradients(tensors_, scale);
}

double ReplicatedOptimizer::clip(double max_norm) {
  if (!fused_clip_) {
    pending_clip_ = at::Tensor();
    opt_->before_clip();
    return opt_->clips() ? optim::clip_grad_norm(tensors_, max_norm) : 0.0;
  }
  return clip_on_device(max_norm).item<double>();
}

at::Tensor ReplicatedOptimizer::clip_on_device(double max_norm) {
  if (!fused_clip_) return {};
  pending_clip_ = at::Tensor();
  opt_->before_clip();
  const auto zero = [] { return at::zeros({}, at::kDouble); };
  if (!opt_->clips()) return zero();  // LLaMA-Factory's layer-wise steps left its clipping no gradient
  const auto norm = optim::global_grad_norm(tensors_);
  if (!norm.defined()) return zero();
  if (max_norm > 0) pending_clip_ = optim::clip_factor(norm, max_norm);
  return norm;
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
  const auto tensors = opt_->state();
  if (tensors.empty()) return {};  // before the first update: no state yet
  std::vector<std::pair<std::string, at::Tensor>> state;
  for (const auto& t : tensors) state.emplace_back(ckpt::moment_key(t.param, t.moment, 0, 0, true), t.tensor);
  model::save_tensor_file(dir / ckpt::kOptimizerFile, state);
  return {ckpt::kOptimizerFile};
}

void ReplicatedOptimizer::load(const fs::path& dir, int64_t steps) {
  const ckpt::OptimizerStateReader reader(dir);
  if (reader.empty()) return;
  opt_->load_state(
      [&](const std::string& param, const std::string& moment, at::Tensor out) {
        auto host = at::empty(out.sizes(), out.options().device(at::kCPU));
        reader.read(param, moment, 0, out.numel(), host);
        out.copy_(host);
      },
      steps);
}

std::vector<std::string> ReplicatedOptimizer::save_slice(const fs::path& dir, int64_t slice) const {
  const auto tensors = opt_->state();
  if (tensors.empty()) return {};
  std::vector<std::pair<std::string, at::Tensor>> state;
  for (const auto& t : tensors) {
    const int64_t n = t.tensor.numel();
    state.emplace_back(ckpt::moment_key(t.param, t.moment, slice * n, (slice + 1) * n, false), t.tensor.reshape({-1}));
  }
  const auto file = ckpt::optimizer_rank_file(slice);
  model::save_tensor_file(dir / file, state);
  return {file};
}

void ReplicatedOptimizer::load_slice(const fs::path& dir, int64_t steps, int64_t slice) {
  const ckpt::OptimizerStateReader reader(dir);
  if (reader.empty()) return;
  opt_->load_state(
      [&](const std::string& param, const std::string& moment, at::Tensor out) {
        auto host = at::empty(out.sizes(), out.options().device(at::kCPU));
        reader.read(param, moment, slice * out.numel(), (slice + 1) * out.numel(), host);
        out.copy_(host);
      },
      steps);
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
