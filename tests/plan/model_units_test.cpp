// The model's units and parameter counts from config.json (lf/plan/model_units.h), by hand.
#include <gtest/gtest.h>

#include "lf/plan/model_units.h"

namespace lf::plan {
namespace {

model::ModelConfig shape(const std::string& name) {
  return model::load_model_config(std::string(LF_SOURCE_DIR) + "/configs/models/" + name + ".json");
}

TEST(ModelUnits, EmbeddingLayersHeadOfQwen7b) {
  const auto mc = shape("qwen2.5-7b");
  config::AdapterSection full;
  full.finetuning_type = "full";
  const auto units = unit_parameters(mc, full);
  ASSERT_EQ(units.size(), 30u);
  EXPECT_EQ(units[0].name, "embedding");
  EXPECT_EQ(units[0].params, 152064LL * 3584);
  // q, k, v, o, gate, up, down + q/k/v biases + two norms.
  const int64_t layer = 3584LL * 3584 * 2 + 3584LL * 512 * 2 + 3LL * 3584 * 18944 + 3584 + 512 * 2 + 2 * 3584;
  EXPECT_EQ(units[1].name, "layer 0");
  EXPECT_EQ(units[1].params, layer);
  EXPECT_EQ(units[29].name, "head");
  EXPECT_EQ(units[29].params, 152064LL * 3584 + 3584);  // untied lm_head + the final norm
  const auto counts = parameter_counts(mc, full);
  EXPECT_EQ(counts.total, model::num_parameters(mc));
  EXPECT_EQ(counts.total, 7615616512LL);
  EXPECT_EQ(counts.trainable, counts.total);
  EXPECT_EQ(counts.frozen, 0);
}

TEST(ModelUnits, LoraAdaptersBelongToTheirLayer) {
  const auto mc = shape("qwen2.5-1.5b");
  config::AdapterSection lora;
  lora.lora_rank = 8;
  const int64_t h = 1536, kv = 256, ff = 8960;
  const int64_t per_layer = 8 * ((h + h) + (h + kv) + (h + kv) + (h + h) + 3 * (h + ff));
  EXPECT_EQ(lora_params_per_layer(mc, lora), per_layer);
  auto units = unit_parameters(mc, lora);
  EXPECT_EQ(units[0].trainable, 0);
  EXPECT_EQ(units[1].trainable, per_layer);
  EXPECT_EQ(units.back().params, h);  // tied: the head unit holds the final norm only
  EXPECT_EQ(parameter_counts(mc, lora).frozen, model::num_parameters(mc));
  lora.lora_target = {"q_proj", "self_attn.v_proj"};
  EXPECT_EQ(lora_params_per_layer(mc, lora), 8 * ((h + h) + (h + kv)));
  lora.additional_target = {"embed_tokens"};  // a trained copy beside the frozen original
  units = unit_parameters(mc, lora);
  EXPECT_EQ(units[0].trainable, 151936 * h);
  EXPECT_TRUE(head_trainable(mc, lora));
}

// peft's names: a target naming one layer's module adapts that module only.
TEST(ModelUnits, LoraOnOneLayersModuleCountsInThatLayer) {
  const auto mc = shape("qwen2.5-1.5b");
  config::AdapterSection lora;
  lora.lora_rank = 8;
  lora.lora_target = {"model.layers.1.mlp.down_proj"};
  const int64_t h = 1536, ff = 8960;
  const auto units = unit_parameters(mc, lora);
  EXPECT_EQ(units[1].trainable, 0);  // layer 0
  EXPECT_EQ(units[2].trainable, 8 * (ff + h));
  EXPECT_EQ(units[3].trainable, 0);
  EXPECT_EQ(parameter_counts(mc, lora).lora, 8 * (ff + h));
  EXPECT_EQ(lora_linears(mc, lora).size(), 1u);  // down_proj, adapted in some layer
}

TEST(ModelUnits, FreezeTrainsTheLastLayersAndExtraModules) {
  const auto mc = shape("qwen2.5-1.5b");
  config::AdapterSection f;
  f.finetuning_type = "freeze";
  f.freeze_trainable_layers = 2;
  const auto units = unit_parameters(mc, f);
  EXPECT_EQ(units[26].trainable, 0);  // layer 25
  EXPECT_EQ(units[27].trainable, units[27].params);  // layers 26 and 27 (units 27, 28)
  EXPECT_EQ(parameter_counts(mc, f).trainable, 2 * units[28].params);
  EXPECT_EQ(layers_in_backward(mc, f), 2);
  EXPECT_FALSE(head_trainable(mc, f));
  f.freeze_trainable_modules = {"mlp"};
  EXPECT_EQ(unit_parameters(mc, f)[28].trainable, 3LL * 1536 * 8960);
  f.freeze_extra_modules = {"embed_tokens"};
  EXPECT_EQ(unit_parameters(mc, f)[0].trainable, 151936LL * 1536);
  EXPECT_EQ(layers_in_backward(mc, f), 28);
  EXPECT_TRUE(head_trainable(mc, f));  // tied: lm_head is the embedding
  f.freeze_trainable_layers = -3;
  EXPECT_EQ(layers_in_backward(mc, f), 28);
}

}  // namespace
}  // namespace lf::plan
