// The optimizer registry (lf/optim/optimizer.h): every optimizer resumes from its own state exactly, the specs
// say what ZeRO may shard, and the refusals LLaMA-Factory makes are made. The numbers against LLaMA-Factory's
// runs are tests/train/optimizer_parity_test.cpp's.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>

#include "lf/common/error.h"
#include "lf/optim/optimizer.h"

namespace lf::optim {
namespace {

// A small decoder-shaped parameter set (HF names): every optimizer finds its roles in it.
std::vector<NamedTensor> params(uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto r = [&](std::vector<int64_t> shape) { return at::randn(shape, gen) * 0.1; };
  return {{"model.embed_tokens.weight", r({40, 16})},
          {"model.layers.0.self_attn.q_proj.weight", r({16, 16})},
          {"model.layers.0.self_attn.q_proj.bias", r({16})},
          {"model.layers.0.self_attn.k_proj.weight", r({8, 16})},
          {"model.layers.0.mlp.up_proj.weight", r({300, 16})},
          {"model.layers.0.input_layernorm.weight", r({16}) + 1},
          {"model.layers.1.mlp.down_proj.weight", r({16, 300})},
          {"model.norm.weight", r({16}) + 1},
          {"lm_head.weight", r({40, 16})}};
}

OptimizerInputs inputs(const std::string& which, std::vector<NamedTensor> ps) {
  OptimizerInputs in;
  in.params = std::move(ps);
  in.learning_rate = 1e-2;
  in.weight_decay = 0.1;
  in.hidden_size = 16;
  in.num_attention_heads = 4;
  in.num_key_value_heads = 2;
  auto& o = in.options;
  o.use_muon = which == "muon";
  o.use_adam_mini = which == "adam_mini";
  o.use_galore = which == "galore";
  o.use_apollo = which == "apollo";
  o.use_badam = which == "badam";
  o.galore.rank = o.apollo.rank = 4;
  o.galore.update_interval = o.apollo.update_interval = 2;
  o.badam.switch_interval = 3;  // switches after steps 2 and 5: the saved state is one step old
  if (which == "adamw_8bit") o.optim = "adamw_8bit";
  return in;
}

void set_grads(std::vector<NamedTensor>& ps, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (auto& p : ps)
    if (p.tensor.requires_grad() || !p.tensor.grad().defined()) p.tensor.mutable_grad() = at::randn(p.tensor.sizes(), gen);
}

std::vector<NamedTensor> copy(const std::vector<NamedTensor>& ps) {
  std::vector<NamedTensor> out;
  for (const auto& p : ps) out.push_back({p.name, p.tensor.detach().clone().set_requires_grad(true)});
  return out;
}

class EveryOptimizer : public ::testing::TestWithParam<std::string> {};

// Three steps, the state saved; a fresh optimizer on copies of the parameters loads it; two more steps on
// the same gradients give the same parameters on both sides, bit for bit.
TEST_P(EveryOptimizer, ResumesFromItsStateExactly) {
  const auto which = GetParam();
  auto a = params(1);
  for (auto& p : a) p.tensor.set_requires_grad(true);
  auto opt_a = make_optimizer(inputs(which, a));
  EXPECT_EQ(opt_a->name(), which);
  for (int s = 0; s < 3; ++s) {
    set_grads(a, 10 + s);
    opt_a->step();
    opt_a->zero_grad();
  }
  std::map<std::pair<std::string, std::string>, at::Tensor> saved;
  for (const auto& t : opt_a->state()) saved[{t.param, t.moment}] = t.tensor.clone();
  ASSERT_FALSE(saved.empty());
  auto b = copy(a);
  auto opt_b = make_optimizer(inputs(which, b));
  opt_b->load_state(
      [&](const std::string& param, const std::string& moment, at::Tensor out) {
        auto it = saved.find({param, moment});
        ASSERT_NE(it, saved.end()) << param << "." << moment << " was not saved";
        ASSERT_EQ(it->second.numel(), out.numel()) << param << "." << moment;
        out.copy_(it->second.reshape(out.sizes()));
      },
      3);
  for (int s = 3; s < 5; ++s) {
    set_grads(a, 10 + s);
    set_grads(b, 10 + s);
    opt_a->step();
    opt_b->step();
    opt_a->zero_grad();
    opt_b->zero_grad();
  }
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(at::equal(a[i].tensor, b[i].tensor)) << which << " " << a[i].name;
}

INSTANTIATE_TEST_SUITE_P(Registry, EveryOptimizer,
                         ::testing::Values("adamw", "muon", "galore", "apollo", "badam", "adam_mini", "adamw_8bit"));

TEST(OptimizerRegistry, SpecsSayWhatZeroMayShard) {
  EXPECT_EQ(find_optimizer("adamw").spec.shape, StepShape::kElementwise);
  for (const char* n : {"muon", "galore", "apollo", "adam_mini", "adamw_8bit"})
    EXPECT_EQ(find_optimizer(n).spec.shape, StepShape::kWholeMatrix) << n;
  EXPECT_EQ(find_optimizer("badam").spec.shape, StepShape::kReplicated);
  EXPECT_THROW(find_optimizer("lion"), ConfigError);
  // LLaMA-Factory's order: GaLore before LoRA+, LoRA+ before Muon.
  OptimizerOptions o;
  o.use_muon = true;
  EXPECT_EQ(optimizer_name(o, /*loraplus=*/true), "adamw");
  o.use_galore = true;
  EXPECT_EQ(optimizer_name(o, true), "galore");
}

TEST(OptimizerRegistry, LlamaFactorysRefusals) {
  auto ps = params(2);
  auto in = inputs("badam", ps);
  in.world = 2;  // "Layer-wise BAdam only supports DeepSpeed ZeRO-3 training"
  EXPECT_THROW(make_optimizer(in), ConfigError);
  in = inputs("galore", ps);
  in.options.galore.layerwise = true;
  in.world = 2;  // "Distributed training does not support layer-wise GaLore"
  EXPECT_THROW(make_optimizer(in), ConfigError);
  in = inputs("galore", ps);
  in.options.galore.target = {"no_such_module"};
  EXPECT_THROW(make_optimizer(in), ConfigError);
  in = inputs("badam", ps);
  in.options.badam.switch_mode = "random";
  EXPECT_THROW(make_optimizer(in), ConfigError);
  in = inputs("badam", ps);
  in.options.badam.mode = "ratio";
  EXPECT_THROW(make_optimizer(in), ConfigError);
}

// apollo-torch's channel factors run along the shorter side whatever apollo_proj_type says: a forced side that
// leaves rank factors where the matrix needs one per row / column stops apollo-torch; refused up front here.
TEST(OptimizerRegistry, ApolloForcedSideWithChannelScale) {
  auto ps = params(3);
  auto in = inputs("apollo", ps);
  in.options.apollo.proj_type = "left";  // q_proj [16, 16], up_proj [300, 16]: rank 4 factors for 16 / 300 rows
  EXPECT_THROW(make_optimizer(in), ConfigError);
  in.options.apollo.target = {"down_proj"};  // [16, 300]: one factor per column, which left keeps
  EXPECT_NO_THROW(make_optimizer(in));
  in.options.apollo.proj_type = "right";
  EXPECT_THROW(make_optimizer(in), ConfigError);
  in.options.apollo.target = {"up_proj"};
  EXPECT_NO_THROW(make_optimizer(in));
  in = inputs("apollo", ps);
  in.options.apollo.proj_type = "left";
  in.options.apollo.scale_type = "tensor";  // one factor: any side
  EXPECT_NO_THROW(make_optimizer(in));
}

}  // namespace
}  // namespace lf::optim
