// Mixture-of-experts families (Qwen3-MoE, Qwen2-MoE, Mixtral) against transformers: logits, loss,
// every gradient, the load-balancing loss and its gradient (scripts/fixtures/moe_family_fixtures.py,
// fp32 CPU); the per-expert checkpoint round trip; transformers 5's fused layout read; a missing
// expert named; peft and transformers load what lf-train saves.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "lf/common/error.h"
#include "lf/model/fused_loss.h"
#include "lf/model/loader.h"
#include "lf/model/lora.h"
#include "lf/model/loss.h"
#include "lf/model/moe_experts.h"
#include "lf/model/tensor_io.h"
#include "model_test_util.h"

namespace lf::model {
namespace {
namespace fs = std::filesystem;
using test::fixture;
using test::load_ref;
using test::rel_err;

constexpr double kLogitsTol = 1e-4;
constexpr double kGradRelTol = 1e-4;

class MoeFamily : public ::testing::TestWithParam<const char*> {
 protected:
  std::string arch() const { return GetParam(); }
  std::unique_ptr<CausalLM> load() const { return load_causal_lm(fixture(arch() + "_tiny").string(), LoadOptions{}); }
  std::map<std::string, at::Tensor> ref() const { return load_ref(arch() + "_ref.safetensors"); }
};

// Every parameter's gradient against the reference's `prefix` + name.
void expect_gradients(CausalLM& model, const std::map<std::string, at::Tensor>& ref, const std::string& prefix) {
  int checked = 0;
  for (auto& p : model.named_parameters()) {
    auto it = ref.find(prefix + p.name);
    ASSERT_NE(it, ref.end()) << "no reference gradient for " << p.name;
    ASSERT_TRUE(p.tensor->grad().defined()) << p.name;
    EXPECT_LE(rel_err(p.tensor->grad(), it->second), kGradRelTol) << p.name;
    ++checked;
  }
  int want = 0;
  for (const auto& [k, _] : ref) want += k.rfind(prefix, 0) == 0;
  EXPECT_EQ(checked, want) << "every parameter of the reference is ours too";
}

void train_all(CausalLM& model) {
  for (auto& p : model.named_parameters()) p.tensor->set_requires_grad(true);
}

// No mask, no aux loss: the logits and the CE loss's gradients (checkpointed, chunked head too).
TEST_P(MoeFamily, LogitsLossAndEveryGradientAreTransformers) {
  for (const bool checkpointing : {false, true}) {
    auto model = load();
    model->set_gradient_checkpointing(checkpointing);
    train_all(*model);
    const auto r = ref();
    at::Tensor loss;
    if (checkpointing) {
      loss = causal_lm_loss_fused(*model, model->hidden_states(r.at("input_ids")), r.at("labels"), false, 5);
    } else {
      const auto logits = model->forward(r.at("input_ids"));
      EXPECT_LE(test::max_abs_diff(logits, r.at("logits")), kLogitsTol);
      loss = causal_lm_loss(logits, r.at("labels"));
    }
    EXPECT_NEAR(loss.item<double>(), r.at("loss").item<double>(), 1e-5);
    loss.backward();
    expect_gradients(*model, r, "grad.");
  }
}

// transformers' load_balancing_loss_func over the sparse layers with the attention mask, and the
// gradient of CE + coef x aux: the aux part arrives through RouterAuxLoss's nodes.
TEST_P(MoeFamily, AuxLossAndItsGradientAreTransformers) {
  for (const bool checkpointing : {false, true}) {
    auto model = load();
    model->set_gradient_checkpointing(checkpointing);
    train_all(*model);
    const auto r = ref();
    const double coef = r.at("aux.coef").item<double>();
    auto& aux = model->router_aux_loss();
    EXPECT_EQ(aux.sparse_layers(), model->layout().moe_layers);
    aux.begin(r.at("attention_mask").reshape({-1}), coef);
    const auto logits = model->forward(r.at("input_ids"));
    const auto ce = causal_lm_loss(logits, r.at("labels"));
    const auto value = aux.value();
    ASSERT_TRUE(value.defined());
    EXPECT_NEAR(value.item<double>(), r.at("aux.aux_loss").item<double>(), 1e-6);
    EXPECT_NEAR(ce.item<double>() + coef * value.item<double>(), r.at("aux.loss").item<double>(), 1e-5);
    ce.backward();
    aux.end();
    expect_gradients(*model, r, "auxgrad.");
  }
}

// The checkpoint's per-expert tensors come back byte for byte; transformers loads the folder.
TEST_P(MoeFamily, PerExpertTensorsRoundTripExactly) {
  test::TempDir tmp;
  auto model = load();
  SaveOptions so;
  so.copy_files_from = fixture(arch() + "_tiny");
  so.max_shard_bytes = 40'000;  // experts split over shards
  save_causal_lm(*model, tmp.path(), so);
  SafetensorsCheckpoint src(fixture(arch() + "_tiny")), ours(tmp.path());
  auto names = src.names();
  auto saved = ours.names();
  std::sort(names.begin(), names.end());
  std::sort(saved.begin(), saved.end());
  EXPECT_EQ(saved, names);
  for (const auto& n : names) {
    const auto a = read_tensor(src.info(n), src.data(n)), b = read_tensor(ours.info(n), ours.data(n));
    EXPECT_TRUE(at::equal(a, b)) << n;
  }
  const auto ids = ref().at("input_ids");
  const auto logits = model->forward(ids);
  save_tensor_file(tmp.path() / "ours.safetensors", {{"input_ids", ids}, {"logits", logits.detach().contiguous()}});
  std::string log;
  const int rc = test::run_python("model_check_load.py",
                                  "--model " + tmp.path().string() + " --ours " + (tmp.path() / "ours.safetensors").string(),
                                  &log);
  if (rc == -1) GTEST_SKIP() << "LF_PYTHON not configured: transformers check skipped (own round trip passed)";
  EXPECT_EQ(rc, 0) << log;
}

INSTANTIATE_TEST_SUITE_P(Families, MoeFamily, ::testing::Values("qwen3_moe", "qwen2_moe", "mixtral"));

// A folder in transformers 5's fused layout (experts.gate_up_proj / experts.down_proj whole) loads
// into the same model as the per-expert one.
TEST(Moe, FusedExpertLayoutLoads) {
  test::TempDir tmp;
  auto model = load_causal_lm(fixture("qwen3_moe_tiny").string(), LoadOptions{});
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (auto& p : model->named_parameters()) tensors.push_back({p.name, *p.tensor});
  save_tensors(tmp.path(), tensors, 1ull << 40, "model");
  fs::copy_file(fixture("qwen3_moe_tiny") / "config.json", tmp.path() / "config.json");
  auto back = load_causal_lm(tmp.path().string(), LoadOptions{});
  auto a = model->named_parameters(), b = back->named_parameters();
  for (size_t k = 0; k < a.size(); ++k) EXPECT_TRUE(at::equal(*a[k].tensor, *b[k].tensor)) << a[k].name;
}

// A folder lacking one expert's tensor: the error names it.
TEST(Moe, MissingExpertIsNamed) {
  test::TempDir tmp;
  const auto src = fixture("mixtral_tiny");
  SafetensorsCheckpoint ckpt(src);
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const auto& n : ckpt.names())
    if (n != "model.layers.1.block_sparse_moe.experts.2.w3.weight") tensors.push_back({n, read_tensor(ckpt.info(n), ckpt.data(n))});
  save_tensors(tmp.path(), tensors, 1ull << 40, "model");
  fs::copy_file(src / "config.json", tmp.path() / "config.json");
  try {
    load_causal_lm(tmp.path().string(), LoadOptions{});
    FAIL() << "loaded a checkpoint without an expert";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.1.block_sparse_moe.experts.2.w3.weight"), std::string::npos)
        << e.what();
  }
}

// QLoRA over a mixture of experts: refused with the reason (the fused experts have no 4-bit format).
TEST(Moe, FourBitBaseIsRefused) {
  LoadOptions o;
  o.quantize = quant::Bnb4Spec{};
  try {
    load_causal_lm(fixture("qwen3_moe_tiny").string(), o);
    FAIL() << "quantized a mixture-of-experts base";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("mixture-of-experts"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Qwen3MoeForCausalLM"), std::string::npos) << e.what();
  }
}

// The grouped path's ends and the per-expert path agree on the permutation.
TEST(Moe, RoutingSortsChoicesByExpert) {
  const auto chosen = at::tensor({2, 0, 1, 2, 0, 3}, at::kLong).view({3, 2});  // 3 tokens, top-2 of 4
  const auto r = route_tokens(chosen, 4, false);
  EXPECT_EQ(r.host_ends, (std::vector<int64_t>{2, 3, 5, 6}));
  EXPECT_TRUE(at::equal(r.token, at::tensor({0, 2, 1, 0, 1, 2}, at::kLong)));
  EXPECT_TRUE(at::equal(r.order.index_select(0, r.slot_of), at::arange(6, at::kLong)));
}

// LoRA on a MoE family adapts what peft adapts under LLaMA-Factory's lora_target: all (its nn.Linear
// modules: attention, dense MLPs, Qwen2-MoE's shared expert and its gate), never the fused experts
// or the router; naming them is an error that says why.
TEST(Moe, LoraTargetsAreLlamaFactorys) {
  auto model = load_causal_lm(fixture("qwen2_moe_tiny").string(), LoadOptions{});
  std::vector<std::string> shorts;
  for (const auto& l : model->layout().linears)
    if (std::find(shorts.begin(), shorts.end(), l.short_name) == shorts.end()) shorts.push_back(l.short_name);
  EXPECT_EQ(shorts, (std::vector<std::string>{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                              "down_proj", "shared_expert_gate"}));
  for (const char* t : {"experts", "gate", "gate_up_proj"}) {
    auto m = load_causal_lm(fixture("qwen3_moe_tiny").string(), LoadOptions{});
    LoraConfig c;
    c.target = {t};
    try {
      apply_lora(*m, c);
      ADD_FAILURE() << "lora_target " << t << " accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("experts"), std::string::npos) << e.what();
    }
  }
}

// peft loads lf-train's adapter on a MoE model (attention and the shared expert adapted) with our logits.
TEST(Moe, SavedAdapterLoadsInPeft) {
  test::TempDir tmp;
  auto model = load_causal_lm(fixture("qwen2_moe_tiny").string(), LoadOptions{});
  LoraConfig cfg;
  cfg.rank = 4;
  cfg.alpha = 8;
  cfg.target = {"all"};
  apply_lora(*model, cfg);
  {
    c10::NoGradGuard g;
    for (auto& p : lora_parameters(*model)) p.tensor->add_(at::randn(p.tensor->sizes()) * 0.3);
  }
  const auto ids = load_ref("qwen2_moe_ref.safetensors").at("input_ids");
  const auto logits = model->forward(ids);
  const fs::path out = tmp.path() / "adapter";
  save_lora_adapter(*model, cfg, out, fixture("qwen2_moe_tiny").string());
  auto back = load_causal_lm(fixture("qwen2_moe_tiny").string(), LoadOptions{});
  load_lora_adapter(*back, out);
  EXPECT_TRUE(at::allclose(back->forward(ids), logits, 0, 1e-6));
  save_tensor_file(tmp.path() / "ours.safetensors", {{"input_ids", ids}, {"logits", logits.detach().contiguous()}});
  std::string log;
  const int rc = test::run_python("model_check_load.py",
                                  "--model " + fixture("qwen2_moe_tiny").string() + " --adapter " + out.string() +
                                      " --ours " + (tmp.path() / "ours.safetensors").string(),
                                  &log);
  if (rc == -1) GTEST_SKIP() << "LF_PYTHON not configured: peft check skipped (own reload passed)";
  EXPECT_EQ(rc, 0) << log;
}

}  // namespace
}  // namespace lf::model
