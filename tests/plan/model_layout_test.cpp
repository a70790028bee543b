// Each family's layout (lf/model/model_layout.h) against what transformers wrote for it: the
// fixtures' model.safetensors (scripts/fixtures/model_fixtures.py) hold exactly the layout's HF
// tensors, of its shapes; units, LoRA's modules and the counts follow the layers. Torch-free.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "lf/model/model_layout.h"
#include "lf/model/safetensors.h"

namespace lf::model {
namespace {

std::string fixture(const std::string& name) { return std::string(LF_SOURCE_DIR) + "/tests/fixtures/model/" + name; }

class FamilyLayout : public ::testing::TestWithParam<const char*> {};

TEST_P(FamilyLayout, HoldsTheTensorsTransformersWrote) {
  const auto config = load_model_config(fixture(GetParam()) + "/config.json");
  const auto layout = model_layout(config);
  SafetensorsFile file(fixture(GetParam()) + "/model.safetensors");
  std::map<std::string, std::vector<int64_t>> written;
  for (const auto& t : file.tensors()) written[t.name] = t.shape;
  std::set<std::string> ours;
  int64_t numel = 0;
  for (const auto& p : layout.params) {
    numel += p.numel();
    ASSERT_EQ(p.hf.size(), 1u) << p.name;  // 1:1 in these families
    for (const auto& t : p.hf) {
      ours.insert(t.name);
      ASSERT_TRUE(written.count(t.name)) << t.name;
      EXPECT_EQ(written[t.name], t.shape) << t.name;
      EXPECT_EQ(t.name, p.name);
    }
  }
  for (const auto& [name, shape] : written) {
    const bool ignored = std::find(layout.hf_ignored.begin(), layout.hf_ignored.end(), name) != layout.hf_ignored.end();
    EXPECT_TRUE(ours.count(name) || ignored) << name << " is written by transformers and not in the layout";
  }
  EXPECT_EQ(num_parameters(config), numel);
  EXPECT_EQ(layout.hf_ignored.empty(), !config.tie_word_embeddings);
}

TEST_P(FamilyLayout, UnitsAreTheEmbeddingEachLayerAndTheHead) {
  const auto config = load_model_config(fixture(GetParam()) + "/config.json");
  const auto layout = model_layout(config);
  ASSERT_EQ(layout.layers.size(), static_cast<size_t>(config.num_layers));
  ASSERT_EQ(layout.unit_names.size(), static_cast<size_t>(config.num_layers + 2));
  EXPECT_EQ(layout.head_unit(), config.num_layers + 1);
  EXPECT_EQ(layout.params.front().name, "model.embed_tokens.weight");
  EXPECT_EQ(layout.params.front().unit, 0);
  for (const auto& p : layout.params) {
    for (int64_t i = 0; i < config.num_layers; ++i)
      if (p.name.starts_with(fmt::format("model.layers.{}.", i))) EXPECT_EQ(p.unit, i + 1) << p.name;
    if (p.name == "model.norm.weight" || p.name == "lm_head.weight") EXPECT_EQ(p.unit, layout.head_unit());
    EXPECT_EQ(p.init, p.name.ends_with("norm.weight") ? ParamInit::kOnes
                      : p.name.ends_with(".bias")     ? ParamInit::kZeros
                                                      : ParamInit::kNormal) << p.name;
  }
  // Seven projections a layer, each with its weight in the layout, in the layer's unit.
  ASSERT_EQ(layout.linears.size(), static_cast<size_t>(7 * config.num_layers));
  for (const auto& l : layout.linears) {
    EXPECT_EQ(l.unit, l.layer + 1);
    EXPECT_TRUE(l.module.starts_with(fmt::format("model.layers.{}.", l.layer)) && l.module.ends_with("." + l.short_name))
        << l.module;
    const auto w = std::find_if(layout.params.begin(), layout.params.end(),
                                [&](const ParamSpec& p) { return p.name == l.module + ".weight"; });
    ASSERT_NE(w, layout.params.end()) << l.module;
    EXPECT_EQ(w->shape, (std::vector<int64_t>{l.out, l.in}));
  }
  EXPECT_EQ(layout.params_per_token, static_cast<double>(num_parameters(config)));
  EXPECT_EQ(layout.attention_flops_per_token_position, 12.0 * config.num_layers * config.hidden_size);
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyLayout,
                         ::testing::Values("llama_tiny", "qwen2_tiny", "qwen3_tiny", "mistral_tiny"));

TEST(ModelLayout, EachFamilyComposesItsLayer) {
  const auto layer = [](const char* name) { return model_layout(load_model_config(fixture(name) + "/config.json")).layers[1]; };
  EXPECT_TRUE(layer("qwen2_tiny").attention.qkv_bias);
  EXPECT_FALSE(layer("qwen2_tiny").attention.o_bias);
  EXPECT_FALSE(layer("qwen2_tiny").attention.qk_norm);
  EXPECT_TRUE(layer("qwen3_tiny").attention.qk_norm);
  EXPECT_FALSE(layer("qwen3_tiny").attention.qkv_bias);
  EXPECT_FALSE(layer("llama_tiny").attention.qkv_bias);
  for (const char* f : {"llama_tiny", "qwen2_tiny", "qwen3_tiny", "mistral_tiny"}) {
    EXPECT_EQ(layer(f).norm, NormKind::kRms);
    EXPECT_EQ(layer(f).attention.kind, AttentionKind::kFullCausal);
    EXPECT_EQ(layer(f).mlp.kind, MlpKind::kSwiGlu);
  }
}

// peft's matching of lora_target names, shared by lora.cpp and the plan.
TEST(ModelLayout, LoraTargetsMatchAsPeftDoes) {
  LinearSpec l{"model.layers.3.self_attn.q_proj", "q_proj", 3, 4, 8, 8, true};
  EXPECT_TRUE(lora_targets(l, {"all"}));
  EXPECT_TRUE(lora_targets(l, {"q_proj"}));
  EXPECT_TRUE(lora_targets(l, {"v_proj", "self_attn.q_proj"}));
  EXPECT_TRUE(lora_targets(l, {"model.layers.3.self_attn.q_proj"}));
  EXPECT_FALSE(lora_targets(l, {"attn.q_proj"}));  // a dotted suffix only
  EXPECT_FALSE(lora_targets(l, {"model.layers.2.self_attn.q_proj"}));
  l.in_all = false;
  EXPECT_FALSE(lora_targets(l, {"all"}));
  EXPECT_TRUE(lora_targets(l, {"q_proj"}));
}

}  // namespace
}  // namespace lf::model
