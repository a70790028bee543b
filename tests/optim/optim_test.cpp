// AdamW, schedules, clipping and the loss scaler against torch / transformers values.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "lf/common/error.h"
#include "lf/optim/adamw.h"
#include "lf/optim/grad_utils.h"
#include "lf/optim/lr_schedule.h"

namespace lf::optim {
namespace {

// One parameter group at weight decay 0.1 (the rest of ParamGroup at its defaults).
ParamGroup decaying(std::vector<at::Tensor> params) {
  ParamGroup g;
  g.params = std::move(params);
  g.weight_decay = 0.1;
  return g;
}

TEST(LrSchedule, HfFormulas) {
  LrSchedule s{LrScheduleKind::kCosine, 2, 10};
  EXPECT_DOUBLE_EQ(s.factor(0), 0.0);
  EXPECT_DOUBLE_EQ(s.factor(1), 0.5);
  EXPECT_DOUBLE_EQ(s.factor(2), 1.0);
  EXPECT_NEAR(s.factor(3), 0.5 * (1 + std::cos(M_PI * 1.0 / 8)), 1e-15);
  s.kind = LrScheduleKind::kLinear;
  EXPECT_DOUBLE_EQ(s.factor(6), 0.5);
  EXPECT_DOUBLE_EQ(s.factor(12), 0.0);
  s.kind = LrScheduleKind::kConstantWithWarmup;
  EXPECT_DOUBLE_EQ(s.factor(1), 0.5);
  EXPECT_DOUBLE_EQ(s.factor(9), 1.0);
  s.kind = LrScheduleKind::kConstant;
  EXPECT_DOUBLE_EQ(s.factor(0), 1.0);
  EXPECT_THROW(parse_lr_schedule("polynomial"), ConfigError);
}

TEST(LrSchedule, WarmupSteps) {
  EXPECT_EQ(hf_warmup_steps(0, 0.1, 95), 10);  // ceil(9.5)
  EXPECT_EQ(hf_warmup_steps(3, 0.5, 95), 3);
  EXPECT_EQ(hf_warmup_steps(0.2, 0, 10), 2);
  EXPECT_EQ(hf_warmup_steps(0, 0, 10), 0);
}

TEST(AdamW, DecayGroupsAsHf) {
  EXPECT_TRUE(hf_decays("model.layers.0.self_attn.q_proj.weight"));
  EXPECT_TRUE(hf_decays("model.embed_tokens.weight"));
  EXPECT_TRUE(hf_decays("base_model.model.model.layers.0.mlp.up_proj.lora_A.weight"));
  EXPECT_FALSE(hf_decays("model.layers.0.self_attn.q_proj.bias"));
  EXPECT_FALSE(hf_decays("model.layers.0.input_layernorm.weight"));
  EXPECT_FALSE(hf_decays("model.layers.0.post_attention_layernorm.weight"));
  EXPECT_FALSE(hf_decays("model.norm.weight"));
  EXPECT_FALSE(hf_decays("model.layers.0.self_attn.q_norm.weight"));
  EXPECT_TRUE(hf_decays("model.normalizer.weight"));
}

TEST(AdamW, MatchesTorchFormulaOverSteps) {
  at::manual_seed(1);
  auto p = at::randn({5}, at::kDouble).set_requires_grad(true);
  auto ref = p.detach().clone();
  AdamW opt({decaying({p})}, {1e-2, 0.9, 0.999, 1e-8});
  auto m = at::zeros_like(ref), v = at::zeros_like(ref);
  for (int t = 1; t <= 4; ++t) {
    auto g = at::randn({5}, at::kDouble);
    p.mutable_grad() = g.clone();
    opt.step();
    ref = ref * (1 - 1e-2 * 0.1);
    m = 0.9 * m + 0.1 * g;
    v = 0.999 * v + 0.001 * g * g;
    auto mhat = m / (1 - std::pow(0.9, t));
    auto denom = (v / (1 - std::pow(0.999, t))).sqrt() + 1e-8;
    ref = ref - 1e-2 * mhat / denom;
    EXPECT_LT((p.detach() - ref).abs().max().item<double>(), 1e-12) << "step " << t;
  }
  opt.zero_grad();
  EXPECT_FALSE(p.grad().defined());
}

TEST(GradUtils, ClipOnTheGlobalNorm) {
  auto a = at::zeros({2}, at::kFloat).set_requires_grad(true);
  auto b = at::zeros({1}, at::kFloat).set_requires_grad(true);
  a.mutable_grad() = at::tensor({3.0f, 0.0f});
  b.mutable_grad() = at::tensor({4.0f});
  EXPECT_NEAR(clip_grad_norm({a, b}, 1.0), 5.0, 1e-6);
  EXPECT_NEAR(a.grad()[0].item<float>(), 3.0 / (5.0 + 1e-6), 1e-6);
  EXPECT_NEAR(b.grad()[0].item<float>(), 4.0 / (5.0 + 1e-6), 1e-6);
  EXPECT_NEAR(clip_grad_norm({a, b}, 10.0), 1.0, 1e-5);  // below max: unchanged
  EXPECT_NEAR(b.grad()[0].item<float>(), 0.8, 1e-5);
}

// What the trainer does with LF_FUSED_CLIP (the default): the norm and factor first, the multiply
// inside the update. On the CPU that multiply is clip_grad_norm's own: the same bits.
TEST(GradUtils, ClipFactorInTheStepEqualsClipThenStep) {
  at::manual_seed(3);
  std::vector<at::Tensor> clipped, deferred;
  for (int64_t n : {7, 33, 1}) {
    auto p = at::randn({n}, at::kFloat);
    clipped.push_back(p.clone().set_requires_grad(true));
    deferred.push_back(p.clone().set_requires_grad(true));
  }
  AdamW a({decaying(clipped)}, {1e-2, 0.9, 0.999, 1e-8});
  AdamW b({decaying(deferred)}, {1e-2, 0.9, 0.999, 1e-8});
  for (int t = 1; t <= 3; ++t) {
    for (size_t i = 0; i < clipped.size(); ++i) {
      auto g = at::randn(clipped[i].sizes(), at::kFloat) * 3.0;
      clipped[i].mutable_grad() = g.clone();
      deferred[i].mutable_grad() = g.clone();
    }
    const double norm = clip_grad_norm(clipped, 1.0);
    a.step();
    const auto total = global_grad_norm(deferred);
    EXPECT_EQ(total.item<double>(), norm);
    EXPECT_LT(clip_factor(total, 1.0).item<double>(), 1.0) << "the grads are clipped: the factor is exercised";
    EXPECT_EQ(clip_factor(total, 1e9).item<double>(), 1.0);
    b.step(clip_factor(total, 1.0));
    for (size_t i = 0; i < clipped.size(); ++i) {
      EXPECT_TRUE(at::equal(deferred[i].detach(), clipped[i].detach())) << "step " << t << " param " << i;
      EXPECT_TRUE(at::equal(deferred[i].grad(), clipped[i].grad())) << "the grads are left clipped, as torch's";
    }
  }
  EXPECT_FALSE(global_grad_norm({at::zeros({2})}).defined()) << "no grads: no norm";
}

TEST(GradUtils, LossScalerBacksOffAndGrows) {
  DynamicLossScaler s({1024.0, 2.0, 0.5, 3});
  auto p = at::zeros({2}, at::kFloat).set_requires_grad(true);
  p.mutable_grad() = at::tensor({2048.0f, std::numeric_limits<float>::infinity()});
  EXPECT_TRUE(s.unscale({p}));
  s.update(true);
  EXPECT_EQ(s.scale(), 512.0);
  p.mutable_grad() = at::tensor({512.0f, 1024.0f});
  EXPECT_FALSE(s.unscale({p}));
  EXPECT_FLOAT_EQ(p.grad()[1].item<float>(), 2.0f);
  for (int i = 0; i < 3; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 1024.0);
  EXPECT_EQ(s.growth_tracker(), 0);
}

}  // namespace
}  // namespace lf::optim
