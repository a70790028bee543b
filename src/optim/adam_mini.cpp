// Adam-mini as LLaMA-Factory 0.9.5 runs it (`use_adam_mini: true`: adam-mini 1.1.1's Adam_mini with the
// model's hidden_size, num_attention_heads and num_key_value_heads): Adam's first moment per element, the
// second one shared by blocks, chosen by the lower-cased parameter name:
//   bias                                        per element (Adam)
//   q_proj / k_proj (wq, wk, query, key)        one per head: [numel / head_numel] rows of head_numel =
//                                               hidden^2 / heads elements
//   embed / lm_head / v_proj / mlp / o_proj ... one per output row (neuron)
//   anything else (the norms)                   one for the whole tensor
// No weight decay on names with "norm", "ln" or "bias". The operations are adam-mini's one for one (its
// `float / tensor` is torch's reciprocal-then-multiply), so the CPU gives the same bits.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "lf/common/error.h"
#include "lf/optim/grad_utils.h"
#include "lf/optim/optimizer.h"

namespace lf::optim {

namespace {

enum class Block { kAdam, kHead, kRow, kWhole };

bool contains_any(const std::string& s, std::initializer_list<const char*> parts) {
  return std::any_of(parts.begin(), parts.end(), [&](const char* p) { return s.find(p) != std::string::npos; });
}

Block block_of(const std::string& lower) {
  if (contains_any(lower, {"bias"})) return Block::kAdam;
  if (contains_any(lower, {"k_proj", "q_proj", "wq", "wk", "query", "key"})) return Block::kHead;
  if (contains_any(lower, {"embed", "embd", "wte", "lm_head", "output", "final_layer", "v_proj", "wv", "value",
                           "o_proj", "wo", "attn.proj", "feed_forward", "linear", "mlp"}))
    return Block::kRow;
  return Block::kWhole;
}

struct Slot {
  NamedTensor p;
  Block block;
  double weight_decay;
  at::Tensor m, v;  // v: [shape] (kAdam), [heads, 1], [rows, 1] or [] (vmean)
  int64_t step = 0;
};

class AdamMini final : public Optimizer {
 public:
  explicit AdamMini(const OptimizerInputs& in) : in_(in), lr_(in.learning_rate) {
    LF_CHECK(in.hidden_size > 0 && in.num_attention_heads > 0, ConfigError,
             "Adam-mini needs the model's hidden_size and num_attention_heads (config.json)");
    head_numel_ = in.hidden_size * in.hidden_size / in.num_attention_heads;
    for (const auto& p : in.params) {
      std::string lower = p.name;
      std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
      const bool no_decay = contains_any(lower, {"norm", "ln", "bias"});
      Slot s{p, block_of(lower), no_decay ? 0.0 : in.weight_decay, {}, {}, 0};
      LF_CHECK(s.block != Block::kHead || p.tensor.numel() % head_numel_ == 0, ConfigError,
               "Adam-mini views {} ({} elements) as heads of hidden_size^2 / num_attention_heads = {} elements, "
               "which do not divide it (adam-mini's own view fails too)",
               p.name, p.tensor.numel(), head_numel_);
      slots_.push_back(std::move(s));
    }
  }

  std::string_view name() const override { return "adam_mini"; }
  void set_lr(double lr) override { lr_ = lr; }
  int64_t steps() const override { return steps_; }

  void step(const at::Tensor& grad_factor) override {
    c10::NoGradGuard no_grad;
    ++steps_;
    init_state();
    for (auto& s : slots_) {
      const auto g = factored_grad(s.p.tensor, grad_factor);
      if (!g.defined()) continue;
      update(s, g);
    }
  }

  void zero_grad() override {
    for (auto& s : slots_)
      if (s.p.tensor.grad().defined()) s.p.tensor.mutable_grad() = at::Tensor();
  }

  std::vector<StateTensor> state() const override {
    std::vector<StateTensor> out;
    if (!ready_) return out;
    for (const auto& s : slots_) {
      out.push_back({s.p.name, "exp_avg", s.m});
      out.push_back({s.p.name, s.block == Block::kAdam ? "exp_avg_sq" : "vmean", s.v});
    }
    return out;
  }

  void load_state(const StateRead& read, int64_t steps) override {
    c10::NoGradGuard no_grad;
    init_state();
    for (auto& s : slots_) {
      read(s.p.name, "exp_avg", s.m);
      read(s.p.name, s.block == Block::kAdam ? "exp_avg_sq" : "vmean", s.v);
      s.step = steps;
    }
    steps_ = steps;
  }

 private:
  void init_state() {
    if (ready_) return;
    ready_ = true;
    for (auto& s : slots_) {
      const auto& p = s.p.tensor;
      switch (s.block) {
        case Block::kAdam:
          s.m = at::zeros_like(p);
          s.v = at::zeros_like(p);
          break;
        case Block::kHead:
          s.m = at::zeros_like(p).view({-1, head_numel_});
          s.v = at::zeros({s.m.size(0), 1}, p.options());
          break;
        case Block::kRow:
          s.m = at::zeros_like(p);
          s.v = at::zeros({s.m.size(0), 1}, p.options());
          break;
        case Block::kWhole:
          s.m = at::zeros_like(p);
          s.v = at::zeros({}, p.options());
          break;
      }
    }
  }

  void update(Slot& s, const at::Tensor& grad) {
    auto p = s.p.tensor;
    const double b1 = in_.beta1, b2 = in_.beta2, eps = in_.eps, lr = lr_;
    auto corrections = [&] {
      const double bc1 = 1 - std::pow(b1, static_cast<double>(s.step));
      const double bc2_sqrt = std::sqrt(1 - std::pow(b2, static_cast<double>(s.step)));
      return std::pair{bc1, bc2_sqrt};
    };
    if (s.block == Block::kAdam) {
      s.v.mul_(b2).addcmul_(grad, grad.conj(), 1 - b2);
      ++s.step;
      if (s.weight_decay > 0) p.mul_(1 - lr * s.weight_decay);
      s.m.lerp_(grad, 1 - b1);
      const auto [bc1, bc2_sqrt] = corrections();
      const auto h = (s.v.sqrt() / bc2_sqrt).add_(eps);
      p.addcdiv_(s.m, h, -(lr / bc1));
      return;
    }
    if (s.block == Block::kWhole) {
      const auto tmp_lr = at::sum(grad * grad) / static_cast<double>(static_cast<float>(p.numel()));
      if (s.weight_decay > 0) p.mul_(1 - lr * s.weight_decay);
      ++s.step;
      s.m.lerp_(grad, 1 - b1);
      const auto [bc1, bc2_sqrt] = corrections();
      s.v.mul_(b2).add_(tmp_lr, 1 - b2);
      const auto h = (s.v.sqrt() / bc2_sqrt).add_(eps);
      auto update = s.m * (h.reciprocal() * (1 / bc1));
      update.mul_(lr);
      p.add_(-update);
      return;
    }
    // Per head ([heads, head_numel]) or per row ([rows, cols]).
    const auto g = s.block == Block::kHead ? grad.view({s.m.size(0), head_numel_}) : grad;
    const auto tmp_lr = at::mean(g * g, {1}, /*keepdim=*/true);
    s.v.mul_(b2).add_(tmp_lr, 1 - b2);
    ++s.step;
    if (s.weight_decay > 0) p.mul_(1 - lr * s.weight_decay);
    s.m.lerp_(g, 1 - b1);
    const auto [bc1, bc2_sqrt] = corrections();
    const auto h = (s.v.sqrt() / bc2_sqrt).add_(eps);
    const auto stepsize = (h.reciprocal() * (1 / bc1)).view({s.m.size(0), 1});
    auto update = (s.m * stepsize).view(p.sizes());
    update.mul_(lr);
    p.add_(-update);
  }

  OptimizerInputs in_;
  double lr_;
  int64_t head_numel_ = 0;
  int64_t steps_ = 0;
  bool ready_ = false;
  std::vector<Slot> slots_;
};

}  // namespace

std::unique_ptr<Optimizer> make_adam_mini(const OptimizerInputs& in) { return std::make_unique<AdamMini>(in); }

}  // namespace lf::optim
