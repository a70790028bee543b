// Logits and gradients against transformers / peft references (fp32, CPU).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "lf/model/fused_loss.h"
#include "lf/model/loader.h"
#include "lf/model/lora.h"
#include "lf/model/loss.h"
#include "model_test_util.h"

namespace lf::model {
namespace {
using test::fixture;
using test::load_ref;
using test::rel_err;

constexpr double kLogitsTol = 1e-4;
constexpr double kGradRelTol = 1e-4;

// The reference batch's loss, checked against the reference's: through causal_lm_loss_fused
// with that chunk size when fused_chunk > 0, else from the full logits (checked too).
at::Tensor checked_loss(const CausalLM& model, const std::map<std::string, at::Tensor>& ref, int64_t fused_chunk) {
  at::Tensor loss;
  if (fused_chunk > 0) {
    loss = causal_lm_loss_fused(model, model.hidden_states(ref.at("input_ids")), ref.at("labels"), false, fused_chunk);
  } else {
    auto logits = model.forward(ref.at("input_ids"));
    EXPECT_LE(test::max_abs_diff(logits, ref.at("logits")), kLogitsTol);
    loss = causal_lm_loss(logits, ref.at("labels"));
  }
  EXPECT_NEAR(loss.item<double>(), ref.at("loss").item<double>(), 1e-5);
  return loss;
}

void check_full(const std::string& arch, bool checkpointing = false, int64_t fused_chunk = 0) {
  auto model = load_causal_lm(fixture(arch + "_tiny").string(), LoadOptions{});
  model->set_gradient_checkpointing(checkpointing);
  auto ref = load_ref(arch + "_ref.safetensors");
  for (auto& p : model->named_parameters()) p.tensor->set_requires_grad(true);
  at::Tensor loss = checked_loss(*model, ref, fused_chunk);
  loss.backward();
  int checked = 0;
  for (auto& p : model->named_parameters()) {
    auto it = ref.find("grad." + p.name);
    ASSERT_NE(it, ref.end()) << "no reference gradient for " << p.name;
    ASSERT_TRUE(p.tensor->grad().defined()) << p.name;
    EXPECT_LE(rel_err(p.tensor->grad(), it->second), kGradRelTol) << p.name;
    ++checked;
  }
  int ref_grads = 0;
  for (const auto& [k, _] : ref) ref_grads += k.rfind("grad.", 0) == 0;
  EXPECT_EQ(checked, ref_grads) << "every parameter of the reference is ours too";
}

TEST(ModelNumerics, Qwen2LogitsAndEveryGradient) { check_full("qwen2"); }
// scripts/fixtures/model_family_fixtures.py (the reference venv's transformers): per-head q/k norms
// and head_dim 16 != hidden / heads; Mistral with head_dim 12 and an (unreached) sliding window.
TEST(ModelNumerics, Qwen3LogitsAndEveryGradient) {
  check_full("qwen3");
  check_full("qwen3", true, 5);  // checkpointed, chunked head
}
TEST(ModelNumerics, MistralLogitsAndEveryGradient) {
  check_full("mistral");
  check_full("mistral", true, 5);
}
TEST(ModelNumerics, LlamaLlama3RopeLogitsAndEveryGradient) { check_full("llama"); }
TEST(ModelNumerics, FusedChunkedHeadLossGivesTheSameGradients) {
  check_full("qwen2", false, 5);  // tied head: its grad adds to the embedding's
  check_full("llama", false, 5);
  check_full("llama", true, 64);  // one chunk, with checkpointing
}

TEST(ModelNumerics, CheckpointedLayersGiveTheSameGradients) {
  check_full("qwen2", true);
  check_full("llama", true);
}

void check_lora(const std::string& arch, size_t expected_modules_per_layer, bool checkpointing = false,
                bool fused = false) {
  auto model = load_causal_lm(fixture(arch + "_tiny").string(), LoadOptions{});
  model->set_gradient_checkpointing(checkpointing);
  auto cfg = load_lora_adapter(*model, fixture(arch + "_lora_init"));
  auto ref = load_ref(arch + "_lora_ref.safetensors");
  auto lora = lora_parameters(*model);
  ASSERT_EQ(lora.size(), 2 * expected_modules_per_layer * model->num_layers());
  at::Tensor loss = checked_loss(*model, ref, fused ? 7 : 0);
  loss.backward();
  for (auto& p : lora) {
    auto it = ref.find("grad." + p.name);
    ASSERT_NE(it, ref.end()) << "no reference gradient for " << p.name;
    EXPECT_EQ(p.tensor->scalar_type(), at::kFloat);
    EXPECT_LE(rel_err(p.tensor->grad(), it->second), kGradRelTol) << p.name;
  }
  for (auto& p : model->named_parameters()) EXPECT_FALSE(p.tensor->grad().defined()) << p.name << " is frozen";
}

TEST(ModelNumerics, Qwen2LoraAllTargetsMatchesPeft) { check_lora("qwen2", 7); }
TEST(ModelNumerics, LlamaLoraListedTargetsMatchesPeft) { check_lora("llama", 2); }
TEST(ModelNumerics, CheckpointedLoraOverFrozenBaseMatchesPeft) { check_lora("qwen2", 7, true); }
TEST(ModelNumerics, FusedLossLoraOverFrozenHeadMatchesPeft) { check_lora("llama", 2, true, true); }

TEST(ModelNumerics, CheckpointingReplaysLoraDropoutMasks) {
  // Same seed, dropout on: checkpointed and plain runs must give identical A/B grads.
  std::vector<at::Tensor> grads[2];
  for (int ckpt = 0; ckpt < 2; ++ckpt) {
    auto model = load_causal_lm(fixture("qwen2_tiny").string(), LoadOptions{});
    load_lora_adapter(*model, fixture("qwen2_lora_init"));
    for (auto& l : model->layers())
      for (auto& [_, lin] : l.linears()) lin->lora_->dropout_ = 0.3;
    model->set_training(true);
    model->set_gradient_checkpointing(ckpt == 1);
    auto gen = at::globalContext().defaultGenerator(at::kCPU);
    gen.set_current_seed(5);
    auto ref = load_ref("qwen2_ref.safetensors");
    causal_lm_loss(model->forward(ref.at("input_ids")), ref.at("labels")).backward();
    for (auto& p : lora_parameters(*model)) grads[ckpt].push_back(p.tensor->grad());
  }
  ASSERT_EQ(grads[0].size(), grads[1].size());
  for (size_t i = 0; i < grads[0].size(); ++i) EXPECT_LE(rel_err(grads[1][i], grads[0][i]), 1e-6) << i;
}

TEST(ModelNumerics, ShardedBf16CheckpointLoads) {
  auto ref = load_ref("qwen2_sharded_ref.safetensors");
  auto model = load_causal_lm(fixture("qwen2_tiny_sharded_bf16").string(), LoadOptions{});
  EXPECT_LE(test::max_abs_diff(model->forward(ref.at("input_ids")), ref.at("logits")), kLogitsTol);
  LoadOptions bf16;
  bf16.param_dtype = at::kBFloat16;
  auto model16 = load_causal_lm(fixture("qwen2_tiny_sharded_bf16").string(), bf16);
  EXPECT_EQ(model16->named_parameters().front().tensor->scalar_type(), at::kBFloat16);
}

TEST(ModelNumerics, MixedPrecisionComputeStaysClose) {
  // fp32 parameters, bf16 activations: the autocast-like path runs and stays near fp32.
  auto model = load_causal_lm(fixture("qwen2_tiny").string(), LoadOptions{});
  auto ref = load_ref("qwen2_ref.safetensors");
  model->set_compute_dtype(at::kBFloat16);
  auto logits = model->forward(ref.at("input_ids"));
  EXPECT_EQ(logits.scalar_type(), at::kBFloat16);
  EXPECT_LE(rel_err(logits.to(at::kFloat), ref.at("logits")), 5e-2);
}

TEST(ModelNumerics, ExplicitPositionIdsMatchDefault) {
  auto model = load_causal_lm(fixture("llama_tiny").string(), LoadOptions{});
  auto ids = load_ref("llama_ref.safetensors").at("input_ids");
  auto pos = at::arange(ids.size(1), at::TensorOptions().dtype(at::kLong)).unsqueeze(0).expand_as(ids);
  EXPECT_LE(test::max_abs_diff(model->forward(ids, pos), model->forward(ids)), 1e-6);
  // RoPE is relative: a constant shift leaves the logits unchanged (to rounding), a
  // restart in the middle of the row (packing) does not.
  EXPECT_LE(test::max_abs_diff(model->forward(ids, pos + 7), model->forward(ids)), 1e-5);
  auto restart = pos.remainder(ids.size(1) / 2);
  EXPECT_GT(test::max_abs_diff(model->forward(ids, restart), model->forward(ids)), 1e-4);
}

TEST(ModelNumerics, RandomInitFollowsHf) {
  LoadOptions o;
  o.random_init = true;
  o.seed = 7;
  auto model = load_causal_lm(fixture("qwen2_tiny/config.json").string(), o);
  for (auto& p : model->named_parameters()) {
    if (p.name.find("norm.weight") != std::string::npos) EXPECT_EQ(p.tensor->min().item<float>(), 1.0f) << p.name;
    else if (p.name.find("bias") != std::string::npos) EXPECT_EQ(p.tensor->abs().max().item<float>(), 0.0f) << p.name;
    else EXPECT_NEAR(p.tensor->std().item<double>(), 0.02, 0.004) << p.name;
  }
  auto again = load_causal_lm(fixture("qwen2_tiny/config.json").string(), o);
  EXPECT_TRUE(at::equal(*model->named_parameters()[1].tensor, *again->named_parameters()[1].tensor));
}

}  // namespace
}  // namespace lf::model
