#include "lf/optim/adamw.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>

#include "lf/common/error.h"

namespace lf::optim {

double loraplus_lr_scale(const std::string& hf_name, int64_t ndim, double ratio) {
  if (ratio <= 0) return 1.0;
  return hf_name.find("lora_B") != std::string::npos || ndim == 1 ? ratio : 1.0;
}

bool hf_decays(const std::string& hf_name) {
  std::string n = hf_name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (n.find("bias") != std::string::npos || n.find("layernorm") != std::string::npos ||
      n.find("rmsnorm") != std::string::npos)
    return false;
  // (?:^|\.)norm(?:$|\.) and _norm(?:$|\.)
  for (size_t pos = n.find("norm"); pos != std::string::npos; pos = n.find("norm", pos + 1)) {
    const bool end_ok = pos + 4 == n.size() || n[pos + 4] == '.';
    if (!end_ok) continue;
    if (pos == 0 || n[pos - 1] == '.' || n[pos - 1] == '_') return false;
  }
  return true;
}

AdamW::AdamW(std::vector<ParamGroup> groups, const AdamWOptions& options)
    : groups_(std::move(groups)), options_(options) {
  for (const auto& g : groups_)
    for (const auto& p : g.params)
      LF_CHECK(p.defined() && p.is_floating_point(), ConfigError, "AdamW: parameters must be floating-point tensors");
}

void AdamW::init_state() {
  if (!exp_avg_.empty()) return;
  for (const auto& g : groups_)
    for (const auto& p : g.params) {
      exp_avg_.push_back(at::zeros_like(p, at::MemoryFormat::Preserve));
      exp_avg_sq_.push_back(at::zeros_like(p, at::MemoryFormat::Preserve));
    }
}

void adamw_update(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
                  const std::vector<at::Tensor>& exp_avg, const std::vector<at::Tensor>& exp_avg_sq, int64_t step,
                  double lr, double weight_decay, const AdamWOptions& o, const at::Tensor& grad_factor) {
  c10::NoGradGuard no_grad;
  std::vector<at::Tensor> unfused_grads;  // those the fused kernel does not scale (a CPU one: clipped as torch clips)
  for (size_t k = 0; k < params.size(); ++k)
    if (grad_factor.defined() && !(o.fused && params[k].is_cuda())) unfused_grads.push_back(grads[k]);
  if (!unfused_grads.empty()) at::_foreach_mul_(unfused_grads, grad_factor.to(unfused_grads[0].scalar_type()));
  const double b1 = o.beta1, b2 = o.beta2, eps = o.eps;
  const double bias_correction1 = 1.0 - std::pow(b1, static_cast<double>(step));
  const double bias_correction2_sqrt = std::sqrt(1.0 - std::pow(b2, static_cast<double>(step)));
  const double step_size = lr / bias_correction1;
  // Fused path: every CUDA parameter of the list in one kernel launch.
  std::vector<at::Tensor> fp, fg, fm, fv, fs;
  at::Tensor step_t;  // one 0-dim step count, read (not written) by the fused kernel
  for (size_t k = 0; k < params.size(); ++k) {
    const auto& p = params[k];
    const auto& grad = grads[k];
    const auto& m = exp_avg[k];
    const auto& v = exp_avg_sq[k];
    // A bf16 parameter on the CPU (pure_bf16): HF's default adamw_torch_fused, whose CPU kernel steps each element
    // in fp32 and rounds once; the per-op path would round every op to bf16.
    if (o.fused && (p.is_cuda() || p.scalar_type() != at::kFloat)) {
      fp.push_back(p);
      fg.push_back(grad);
      fm.push_back(m);
      fv.push_back(v);
      if (!step_t.defined()) step_t = at::full({}, static_cast<double>(step), p.options().dtype(at::kFloat));
      fs.push_back(step_t);
      continue;
    }
    // torch.optim.adamw._single_tensor_adamw, step for step.
    auto pm = p;
    pm.mul_(1.0 - lr * weight_decay);
    m.lerp_(grad, 1.0 - b1);
    v.mul_(b2).addcmul_(grad, grad, 1.0 - b2);
    auto denom = (v.sqrt() / bias_correction2_sqrt).add_(eps);
    pm.addcdiv_(m, denom, -step_size);
  }
  if (fp.empty()) return;
  // The kernel divides each gradient by grad_scale (GradScaler's unscale) and stores it back.
  const auto grad_scale = grad_factor.defined() && fp[0].is_cuda()
                              ? std::optional<at::Tensor>(at::reciprocal(grad_factor.to(fp[0].device(), at::kFloat)))
                              : std::nullopt;
  at::_fused_adamw_(fp, fg, fm, fv, {}, fs, lr, b1, b2, weight_decay, eps, /*amsgrad=*/false, /*maximize=*/false,
                    grad_scale);
}

void AdamW::step(const at::Tensor& grad_factor) {
  c10::NoGradGuard no_grad;
  init_state();
  ++step_;
  size_t k = 0;
  for (const auto& g : groups_) {
    std::vector<at::Tensor> p, gr, m, v;
    for (const auto& param : g.params) {
      const size_t i = k++;
      if (!param.grad().defined()) continue;  // left untouched, as torch does
      p.push_back(param);
      gr.push_back(param.grad());
      m.push_back(exp_avg_[i]);
      v.push_back(exp_avg_sq_[i]);
    }
    adamw_update(p, gr, m, v, step_, options_.lr * g.lr_scale, g.weight_decay, options_, grad_factor);
  }
}

void AdamW::load_state(std::vector<at::Tensor> exp_avg, std::vector<at::Tensor> exp_avg_sq, int64_t steps) {
  size_t k = 0;
  for (const auto& g : groups_)
    for (const auto& p : g.params) {
      LF_CHECK(k < exp_avg.size() && k < exp_avg_sq.size() && exp_avg[k].sizes() == p.sizes() &&
                   exp_avg_sq[k].sizes() == p.sizes(),
               ConfigError, "AdamW::load_state: moment {} does not match its parameter", k);
      ++k;
    }
  LF_CHECK(k == exp_avg.size() && k == exp_avg_sq.size(), ConfigError,
           "AdamW::load_state: {} moments for {} parameters", exp_avg.size(), k);
  exp_avg_.clear();
  exp_avg_sq_.clear();
  k = 0;
  for (const auto& g : groups_)
    for (const auto& p : g.params) {
      exp_avg_.push_back(exp_avg[k].to(p.options()).contiguous());
      exp_avg_sq_.push_back(exp_avg_sq[k].to(p.options()).contiguous());
      ++k;
    }
  step_ = steps;
}

std::string AdamW::param_name(size_t group, size_t k) const {
  const auto& g = groups_[group];
  return k < g.names.size() ? g.names[k] : fmt::format("group{}.param{}", group, k);
}

std::vector<StateTensor> AdamW::state() const {
  std::vector<StateTensor> out;
  size_t i = 0;
  for (size_t gi = 0; gi < groups_.size() && !exp_avg_.empty(); ++gi)
    for (size_t k = 0; k < groups_[gi].params.size(); ++k, ++i) {
      out.push_back({param_name(gi, k), "exp_avg", exp_avg_[i]});
      out.push_back({param_name(gi, k), "exp_avg_sq", exp_avg_sq_[i]});
    }
  return out;
}

void AdamW::load_state(const StateRead& read, int64_t steps) {
  c10::NoGradGuard no_grad;
  init_state();
  size_t i = 0;
  for (size_t gi = 0; gi < groups_.size(); ++gi)
    for (size_t k = 0; k < groups_[gi].params.size(); ++k, ++i) {
      read(param_name(gi, k), "exp_avg", exp_avg_[i]);
      read(param_name(gi, k), "exp_avg_sq", exp_avg_sq_[i]);
    }
  step_ = steps;
}

std::unique_ptr<Optimizer> make_adamw(const OptimizerInputs& in) {
  // The flat order: decay groups first, each at lr x 1 then lr x the LoRA+ ratio (none without LoRA+: HF's
  // two groups).
  std::vector<ParamGroup> groups;
  const double ratio = in.loraplus_lr_ratio == 1.0 ? 0.0 : in.loraplus_lr_ratio;  // x 1: no groups of its own
  for (const bool decays : {true, false})
    for (const double scale : ratio > 0 ? std::vector<double>{1.0, ratio} : std::vector<double>{1.0}) {
      ParamGroup g{{}, decays ? in.weight_decay : 0.0, scale, {}};
      for (const auto& p : in.params)
        if (hf_decays(p.name) == decays &&
            (ratio <= 0 || (loraplus_lr_scale(p.name, p.tensor.dim(), ratio) != 1.0) == (scale != 1.0))) {
          g.params.push_back(p.tensor);
          g.names.push_back(p.name);
        }
      if (ratio <= 0 || !g.params.empty()) groups.push_back(std::move(g));
    }
  AdamWOptions o;
  o.lr = in.learning_rate;
  o.beta1 = in.beta1;
  o.beta2 = in.beta2;
  o.eps = in.eps;
  o.fused = in.fused;
  return std::make_unique<AdamW>(std::move(groups), o);
}

void AdamW::zero_grad() {
  for (auto& g : groups_)
    for (auto& p : g.params)
      if (p.grad().defined()) p.mutable_grad() = at::Tensor();
}

}  // namespace lf::optim
