// Muon as LLaMA-Factory 0.9.5 runs it (`use_muon: true`: llamafactory/third_party/muon, Moonlight's and
// Keller Jordan's): every trainable 2-D parameter but the embeddings and lm_head steps by SGD momentum
// (0.95, Nesterov) orthogonalised by 5 quintic Newton-Schulz iterations in bf16, at lr x 0.2 sqrt(max(A, B));
// the rest (embeddings, head, norms, biases) by its AdamW backup (eps outside the square root's bias
// correction). Both decay every parameter by lr x weight_decay first. The operations are the Python's, one
// for one, so that on the CPU the same libtorch gives the same bits.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cmath>

#include "lf/optim/grad_utils.h"
#include "lf/optim/optimizer.h"

namespace lf::optim {

namespace {

constexpr double kMomentum = 0.95;
constexpr bool kNesterov = true;
constexpr int kNsSteps = 5;

// zeropower_via_newtonschulz5: G [A, B] -> its approximate orthogonalisation, bf16 (the transposed view
// when A > B, as the Python returns it).
at::Tensor newton_schulz5(const at::Tensor& g, int steps) {
  const double a = 3.4445, b = -4.7750, c = 2.0315;
  auto x = g.to(at::kBFloat16);
  const bool tall = g.size(0) > g.size(1);
  if (tall) x = x.t();
  x = x / (at::linalg_vector_norm(x, 2) + 1e-7);  // spectral norm at most 1 (torch.norm: vector_norm)
  for (int i = 0; i < steps; ++i) {
    auto am = at::matmul(x, x.t());
    auto bm = am * b + at::matmul(am * c, am);  // b * A + c * A @ A, i.e. (c * A) @ A
    x = x * a + at::matmul(bm, x);
  }
  return tall ? x.t() : x;
}

class Muon final : public Optimizer {
 public:
  explicit Muon(const OptimizerInputs& in) : in_(in), lr_(in.learning_rate) {
    for (const auto& p : in.params)
      (p.tensor.dim() == 2 && p.name.find("embed") == std::string::npos && p.name.find("lm_head") == std::string::npos
           ? muon_
           : adam_)
          .push_back({p.name, p.tensor});
  }

  std::string_view name() const override { return "muon"; }
  void set_lr(double lr) override { lr_ = lr; }
  int64_t steps() const override { return steps_; }

  void step(const at::Tensor& grad_factor) override {
    c10::NoGradGuard no_grad;
    ++steps_;
    init_state();
    const double wd = in_.weight_decay;
    for (size_t i = 0; i < muon_.size(); ++i) {
      auto p = muon_[i].tensor;
      const auto g = factored_grad(p, grad_factor);
      if (!g.defined()) continue;
      auto& buf = momentum_[i];
      buf.mul_(kMomentum).add_(g);
      const auto update = newton_schulz5(kNesterov ? g.add(buf, kMomentum) : buf, kNsSteps);
      const double adjusted_lr = lr_ * (0.2 * std::sqrt(static_cast<double>(std::max(p.size(0), p.size(1)))));
      p.mul_(1 - lr_ * wd);
      p.add_(update, -adjusted_lr);
    }
    const double b1 = in_.beta1, b2 = in_.beta2;
    for (size_t i = 0; i < adam_.size(); ++i) {
      auto p = adam_[i].tensor;
      const auto g = factored_grad(p, grad_factor);
      if (!g.defined()) continue;
      const double step = static_cast<double>(++adam_steps_[i]);
      m1_[i].lerp_(g, 1 - b1);
      m2_[i].lerp_(g.square(), 1 - b2);
      const auto direction = m1_[i] / (m2_[i].sqrt() + in_.eps);
      const double scale = (1 - std::pow(b1, step)) / std::pow(1 - std::pow(b2, step), 0.5);
      p.mul_(1 - lr_ * wd);
      p.add_(direction, -lr_ / scale);
    }
  }

  void zero_grad() override {
    for (auto* list : {&muon_, &adam_})
      for (auto& p : *list)
        if (p.tensor.grad().defined()) p.tensor.mutable_grad() = at::Tensor();
  }

  std::vector<StateTensor> state() const override {
    std::vector<StateTensor> out;
    if (!ready_) return out;
    for (size_t i = 0; i < muon_.size(); ++i) out.push_back({muon_[i].name, "momentum_buffer", momentum_[i]});
    for (size_t i = 0; i < adam_.size(); ++i) {
      out.push_back({adam_[i].name, "exp_avg", m1_[i]});
      out.push_back({adam_[i].name, "exp_avg_sq", m2_[i]});
    }
    return out;
  }

  void load_state(const StateRead& read, int64_t steps) override {
    c10::NoGradGuard no_grad;
    init_state();
    for (size_t i = 0; i < muon_.size(); ++i) read(muon_[i].name, "momentum_buffer", momentum_[i]);
    for (size_t i = 0; i < adam_.size(); ++i) {
      read(adam_[i].name, "exp_avg", m1_[i]);
      read(adam_[i].name, "exp_avg_sq", m2_[i]);
      adam_steps_[i] = steps;
    }
    steps_ = steps;
  }

 private:
  void init_state() {
    if (ready_) return;
    ready_ = true;
    for (const auto& p : muon_) momentum_.push_back(at::zeros_like(p.tensor));
    for (const auto& p : adam_) {
      m1_.push_back(at::zeros_like(p.tensor));
      m2_.push_back(at::zeros_like(p.tensor));
      adam_steps_.push_back(0);
    }
  }

  OptimizerInputs in_;
  double lr_;
  int64_t steps_ = 0;
  bool ready_ = false;
  std::vector<NamedTensor> muon_, adam_;
  std::vector<at::Tensor> momentum_, m1_, m2_;
  std::vector<int64_t> adam_steps_;
};

}  // namespace

std::unique_ptr<Optimizer> make_muon(const OptimizerInputs& in) { return std::make_unique<Muon>(in); }

}  // namespace lf::optim
