// BAdam as LLaMA-Factory 0.9.5 runs it (`use_badam: true, badam_mode: layer`: badam 1.4's BlockOptimizer
// around torch's AdamW, one process): the blocks are the decoder layers ("model.layers.N." prefixes, in
// model order; the embeddings, the final norm and lm_head belong to none and never train), one block trains
// at a time (the others' requires_grad off, so the gradient norm and clipping see only it), and after step s
// with (s + 1) % badam_switch_interval == 0 the next block takes over with a fresh AdamW (badam_switch_mode
// ascending / descending from badam_start_block, or fixed on it). Every active parameter decays by 0.01:
// badam builds its groups as {"weight_decay": ..., **base_optimizer.defaults}, and the defaults' weight_decay
// (torch AdamW's 1e-2; LLaMA-Factory passes none) overrides the group's.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <regex>

#include "lf/common/error.h"
#include "lf/optim/adamw.h"

namespace lf::optim {

namespace {

constexpr double kBadamWeightDecay = 1e-2;

// badam's infer_param_groups: r".*layers.[^.]*\." per name, first appearance order.
std::vector<std::string> layer_blocks(const std::vector<NamedTensor>& params) {
  static const std::regex layer(R"(.*layers.[^.]*\.)");
  std::vector<std::string> out;
  for (const auto& p : params) {
    bool seen = false;
    for (const auto& b : out) seen = seen || p.name.find(b) != std::string::npos;
    std::smatch m;
    if (!seen && std::regex_search(p.name, m, layer)) out.push_back(m.str(0));
  }
  return out;
}

class Badam final : public Optimizer {
 public:
  explicit Badam(const OptimizerInputs& in) : in_(in), lr_(in.learning_rate), o_(in.options.badam) {
    check(in);
    blocks_ = layer_blocks(in.params);
    LF_CHECK(!blocks_.empty(), ConfigError,
             "BAdam's blocks are the decoder layers (names with layers.N.), and no trainable parameter has one");
    const int64_t n = static_cast<int64_t>(blocks_.size());
    start_ = o_.start_block ? *o_.start_block : o_.switch_mode == "descending" ? n - 1 : 0;
    LF_CHECK(start_ >= 0 && start_ < n, ConfigError, "badam_start_block {}: the model has {} blocks (decoder layers)", start_, n);
    activate(start_);
  }

  std::string_view name() const override { return "badam"; }
  void set_lr(double lr) override { lr_ = lr; }
  int64_t steps() const override { return steps_; }

  void step(const at::Tensor& grad_factor) override {
    adam_->set_lr(lr_);
    adam_->step(grad_factor);
    ++steps_;
    if ((steps_ + 1) % o_.switch_interval == 0) activate(next_block(active_));
  }

  void zero_grad() override {
    for (const auto& p : in_.params)
      if (p.tensor.grad().defined()) p.tensor.mutable_grad() = at::Tensor();
  }

  // The inactive layers' gradients dropped (their requires_grad off again: the trainer's setup turns every
  // full fine-tuning parameter's on after the optimizer is built).
  void before_clip() override { apply_mask(); }

  std::vector<StateTensor> state() const override { return adam_->state(); }

  // The block schedule replayed to `steps`; the moments of the block's AdamW since its switch.
  void load_state(const StateRead& read, int64_t steps) override {
    int64_t block = start_, since = 0;
    for (int64_t s = 1; s <= steps; ++s) {
      ++since;
      if ((s + 1) % o_.switch_interval == 0) {
        block = next_block(block);
        since = 0;
      }
    }
    activate(block);
    if (since > 0) adam_->load_state(read, since);
    steps_ = steps;
  }

 private:
  static void check(const OptimizerInputs& in) {
    const auto& o = in.options.badam;
    LF_CHECK(o.mode == "layer", ConfigError,
             "badam_mode {}: lf-train runs BAdam's layer mode; the ratio mode (badam's BlockOptimizerRatio: sparse "
             "masked gradients) is not implemented: use badam_mode: layer",
             o.mode);
    // LLaMA-Factory's parser: distributed BAdam only as layer-wise under DeepSpeed ZeRO-3.
    LF_CHECK(in.world == 1, ConfigError,
             "BAdam on {} ranks: LLaMA-Factory refuses it without DeepSpeed ZeRO-3 (\"Layer-wise BAdam only supports "
             "DeepSpeed ZeRO-3 training\"), and lf-train's ZeRO does not switch its sharded trainable set per block: "
             "train BAdam on one process",
             in.world);
    LF_CHECK(o.switch_mode != "random", ConfigError,
             "badam_switch_mode random draws its block order from torch's global generator in the Python process "
             "(badam's torch.randperm), which lf-train does not have: use ascending, descending or fixed");
    LF_CHECK(o.switch_mode != "fixed" || o.start_block.has_value(), ConfigError,
             "badam_switch_mode fixed needs badam_start_block (badam stops without one: its block index is unset)");
    LF_CHECK(o.switch_interval > 0, ConfigError,
             "badam_switch_interval {}: expected > 0 (-1, badam's 'never switch', is not supported)", o.switch_interval);
  }

  int64_t next_block(int64_t b) const {
    const int64_t n = static_cast<int64_t>(blocks_.size());
    if (o_.switch_mode == "ascending") return (b + 1) % n;
    if (o_.switch_mode == "descending") return ((b - 1) % n + n) % n;
    return b;  // fixed
  }

  bool in_block(const std::string& name) const {
    return name.find(blocks_[static_cast<size_t>(active_)]) != std::string::npos;
  }

  void apply_mask() {
    for (const auto& p : in_.params) {
      const bool on = in_block(p.name);
      auto t = p.tensor;
      if (t.requires_grad() != on) t.set_requires_grad(on);
      if (!on && t.grad().defined()) t.mutable_grad() = at::Tensor();
    }
  }

  // The block's parameters train (requires_grad on, the others off), under a fresh AdamW.
  void activate(int64_t block) {
    active_ = block;
    apply_mask();
    ParamGroup g{{}, kBadamWeightDecay, 1.0, {}};
    for (const auto& p : in_.params)
      if (in_block(p.name)) {
        g.params.push_back(p.tensor);
        g.names.push_back(p.name);
      }
    AdamWOptions o;
    o.lr = lr_;
    o.beta1 = in_.beta1;
    o.beta2 = in_.beta2;
    o.eps = in_.eps;
    o.fused = in_.fused;
    adam_ = std::make_unique<AdamW>(std::vector<ParamGroup>{std::move(g)}, o);
  }

  OptimizerInputs in_;
  double lr_;
  BadamOptions o_;
  std::vector<std::string> blocks_;
  int64_t start_ = 0, active_ = 0, steps_ = 0;
  std::unique_ptr<AdamW> adam_;
};

}  // namespace

std::unique_ptr<Optimizer> make_badam(const OptimizerInputs& in) { return std::make_unique<Badam>(in); }

}  // namespace lf::optim
