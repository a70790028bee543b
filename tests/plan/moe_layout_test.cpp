// The mixture-of-experts and Gemma 3 layouts (lf/model/model_layout.h) against what transformers wrote
// for them (tests/fixtures/model/*_tiny, scripts/fixtures/moe_family_fixtures.py and
// gemma_rope_fixtures.py): every per-expert tensor is a piece of a fused parameter, each once and of its
// shape; the counts (total and active per token, as ../shared/bench/hf_reference.py counts them), the
// units, LoRA's modules; and the memory model of the benchmark's MoE rows. Torch-free.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>
#include <set>

#include "lf/config/train_config.h"
#include "lf/model/model_layout.h"
#include "lf/model/safetensors.h"
#include "lf/plan/memory_model.h"

namespace lf::model {
namespace {

std::string source(const std::string& rel) { return std::string(LF_SOURCE_DIR) + "/" + rel; }
std::string fixture(const std::string& name) { return source("tests/fixtures/model/" + name); }

class MoeLayout : public ::testing::TestWithParam<const char*> {};

TEST_P(MoeLayout, HoldsEveryTensorTransformersWroteOnce) {
  const auto config = load_model_config(fixture(GetParam()) + "/config.json");
  const auto layout = model_layout(config);
  SafetensorsFile file(fixture(GetParam()) + "/model.safetensors");
  std::map<std::string, std::vector<int64_t>> written;
  for (const auto& t : file.tensors()) written[t.name] = t.shape;
  std::set<std::string> ours;
  for (const auto& p : layout.params) {
    int64_t pieces = 0;
    for (const auto& t : p.hf) {
      EXPECT_TRUE(ours.insert(t.name).second) << t.name << " twice";
      ASSERT_TRUE(written.count(t.name)) << t.name;
      EXPECT_EQ(written[t.name], t.shape) << t.name;
      int64_t n = 1;
      for (auto d : t.shape) n *= d;
      pieces += n;
    }
    EXPECT_EQ(pieces, p.numel()) << p.name << ": its pieces fill it";
    EXPECT_EQ(p.reads_whole, p.hf.size() > 1) << p.name;
  }
  for (const auto& [name, shape] : written) {
    const bool ignored = std::find(layout.hf_ignored.begin(), layout.hf_ignored.end(), name) != layout.hf_ignored.end();
    EXPECT_TRUE(ours.count(name) || ignored) << name << " is written by transformers and not in the layout";
  }
}

INSTANTIATE_TEST_SUITE_P(Families, MoeLayout, ::testing::Values("qwen3_moe_tiny", "qwen2_moe_tiny", "mixtral_tiny",
                                                                "gemma3_tiny"));

TEST(MoeLayout, SparseLayersAndActiveParameters) {
  const auto c = load_model_config(fixture("qwen3_moe_tiny") + "/config.json");
  const auto l = model_layout(c);
  ASSERT_EQ(l.layers.size(), 3u);
  EXPECT_EQ(l.layers[0].mlp.kind, MlpKind::kMoe);
  EXPECT_EQ(l.layers[1].mlp.kind, MlpKind::kSwiGlu);  // mlp_only_layers: [1]
  EXPECT_EQ(l.layers[2].mlp.moe.index, 1);
  EXPECT_EQ(l.moe_layers, 2);
  // hf_reference.py: every parameter, less the experts a token is not routed to.
  const double per_expert = 3.0 * 32 * 16;
  EXPECT_DOUBLE_EQ(l.active_params(), static_cast<double>(l.total_params()) - 2 * (4 - 2) * per_expert);
  // The published shape: 30.5B parameters, 3.3B active.
  const auto big = model_layout(load_model_config(source("configs/models/qwen3-30b-a3b.json")));
  EXPECT_NEAR(static_cast<double>(big.total_params()) / 1e9, 30.53, 0.01);
  EXPECT_NEAR(big.active_params() / 1e9, 3.35, 0.01);
  // LoRA's linears: the attention only (no dense layer), as peft finds them under LLaMA-Factory.
  for (const auto& lin : big.linears) EXPECT_TRUE(lin.module.find(".self_attn.") != std::string::npos) << lin.module;
  // Mixtral's checkpoint names: block_sparse_moe, w1 (gate) w3 (up) then w2 (down).
  const auto mix = model_layout(load_model_config(fixture("mixtral_tiny") + "/config.json"));
  const auto gate_up = std::find_if(mix.params.begin(), mix.params.end(),
                                    [](const ParamSpec& p) { return p.name == "model.layers.1.mlp.experts.gate_up_proj"; });
  ASSERT_NE(gate_up, mix.params.end());
  EXPECT_EQ(gate_up->hf[0].name, "model.layers.1.block_sparse_moe.experts.0.w1.weight");
  EXPECT_EQ(gate_up->hf[1].name, "model.layers.1.block_sparse_moe.experts.0.w3.weight");
  EXPECT_EQ(gate_up->unit, 2);
}

// The benchmark's rows (scripts/device/moe_check.sh): 30B-A3B LoRA must fit under the peer's 126.3 GiB with
// its 61 GB of bf16 weights; moe-small full holds 16 bytes a parameter of state.
TEST(MoeLayout, MemoryModelOfTheBenchmarkRows) {
  const auto plan_of = [](const std::string& model, const std::string& mode) {
    return config::load_train_config(source("configs/qwen2.5-0.5b-" + mode + ".yaml"),
                                     {"model_name_or_path=" + source("configs/models/" + model + ".json"),
                                      "init_weights=random", "cutoff_len=2048", "packing=true",
                                      "per_device_train_batch_size=4", "gradient_accumulation_steps=1",
                                      "disable_gradient_checkpointing=true", "lora_target=all"})
        .plan;
  };
  const double gib = static_cast<double>(int64_t{1} << 30);
  const auto big = load_model_config(source("configs/models/qwen3-30b-a3b.json"));
  const auto lora = plan::predict_memory(plan_of("qwen3-30b-a3b", "lora"), big, plan::WorldLayout{1, 1});
  EXPECT_GT(lora.gpu_peak() / gib, 60.0);
  EXPECT_LT(lora.gpu_peak() / gib, 126.3);
  EXPECT_GT(lora.gpu_bytes("activations") / gib, 20.0);  // the experts' k slots per token dominate the layers'
  const auto small = load_model_config(source("configs/models/qwen3-moe-small.json"));
  const auto full = plan::predict_memory(plan_of("qwen3-moe-small", "full"), small, plan::WorldLayout{1, 1});
  EXPECT_GT(full.gpu_peak() / gib, 16.0 * static_cast<double>(model_layout(small).total_params()) / gib);
}

}  // namespace
}  // namespace lf::model
