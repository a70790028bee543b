// Bad input: every case is a ConfigError whose message names the problem.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <fstream>

#include "lf/common/error.h"
#include "lf/model/loader.h"
#include "lf/model/lora.h"
#include "lf/model/tensor_io.h"
#include "model_test_util.h"

namespace lf::model {
namespace {
namespace fs = std::filesystem;
using test::fixture;

// Runs f, expects ConfigError whose message contains `needle`.
template <typename F>
void expect_config_error(F f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// A copy of qwen2_tiny with its weights rewritten by `edit` (name -> tensor map).
template <typename F>
fs::path edited_copy(const fs::path& dir, F edit) {
  fs::create_directories(dir);
  fs::copy_file(fixture("qwen2_tiny/config.json"), dir / "config.json");
  auto tensors = load_tensor_file(fixture("qwen2_tiny/model.safetensors"));
  edit(tensors);
  std::vector<std::pair<std::string, at::Tensor>> list(tensors.begin(), tensors.end());
  save_tensor_file(dir / "model.safetensors", list);
  return dir;
}

TEST(ModelErrors, MissingFolder) {
  expect_config_error([] { load_causal_lm("/nonexistent/model", LoadOptions{}); }, "does not exist");
}

TEST(ModelErrors, HubIdSaysHowToDownload) {
  expect_config_error([] { load_causal_lm("Qwen/Qwen2.5-0.5B", LoadOptions{}); },
                      "huggingface-cli download Qwen/Qwen2.5-0.5B --local-dir");
}

TEST(ModelErrors, FolderWithoutWeights) {
  test::TempDir tmp;
  fs::copy_file(fixture("qwen2_tiny/config.json"), tmp.path() / "config.json");
  expect_config_error([&] { load_causal_lm(tmp.path().string(), LoadOptions{}); }, "init_weights: random");
}

TEST(ModelErrors, MissingTensorIsNamed) {
  test::TempDir tmp;
  auto dir = edited_copy(tmp.path() / "m", [](auto& t) { t.erase("model.layers.1.mlp.up_proj.weight"); });
  expect_config_error([&] { load_causal_lm(dir.string(), LoadOptions{}); }, "model.layers.1.mlp.up_proj.weight");
}

TEST(ModelErrors, MisshapedTensorIsNamed) {
  test::TempDir tmp;
  auto dir = edited_copy(tmp.path() / "m", [](auto& t) {
    t["model.layers.0.self_attn.k_proj.weight"] = at::zeros({8, 32});
  });
  expect_config_error([&] { load_causal_lm(dir.string(), LoadOptions{}); },
                      "model.layers.0.self_attn.k_proj.weight (file [8, 32], model [16, 32])");
}

TEST(ModelErrors, UnexpectedTensorIsNamed) {
  test::TempDir tmp;
  auto dir = edited_copy(tmp.path() / "m", [](auto& t) { t["model.layers.9.extra.weight"] = at::zeros({2}); });
  expect_config_error([&] { load_causal_lm(dir.string(), LoadOptions{}); }, "model.layers.9.extra.weight");
}

TEST(ModelErrors, TruncatedSafetensorsIsAnErrorNotSigbus) {
  test::TempDir tmp;
  auto dir = edited_copy(tmp.path() / "m", [](auto&) {});
  const auto size = fs::file_size(dir / "model.safetensors");
  fs::resize_file(dir / "model.safetensors", size - 100);
  expect_config_error([&] { load_causal_lm(dir.string(), LoadOptions{}); }, "truncated");
  fs::resize_file(dir / "model.safetensors", 5);
  expect_config_error([&] { load_causal_lm(dir.string(), LoadOptions{}); }, "shorter than");
}

TEST(ModelErrors, CorruptHeader) {
  test::TempDir tmp;
  const fs::path p = tmp.path() / "bad.safetensors";
  {
    std::ofstream out(p, std::ios::binary);
    const uint64_t n = 12;
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << "{not json!!}";
  }
  expect_config_error([&] { SafetensorsFile f(p); }, "not valid JSON");
  {
    std::ofstream out(p, std::ios::binary);
    const uint64_t n = 1ull << 40;
    out.write(reinterpret_cast<const char*>(&n), 8);
  }
  expect_config_error([&] { SafetensorsFile f(p); }, "implausible");
}

TEST(ModelErrors, UnknownArchitecture) {
  test::TempDir tmp;
  std::ofstream(tmp.path() / "config.json")
      << R"({"architectures": ["GemmaForCausalLM"], "model_type": "gemma", "vocab_size": 8})";
  expect_config_error([&] { load_causal_lm(tmp.path().string(), LoadOptions{}); },
                      "unknown architecture 'GemmaForCausalLM' (model_type 'gemma'); supported: LlamaForCausalLM, "
                      "Qwen2ForCausalLM, Qwen3ForCausalLM, MistralForCausalLM");
}

TEST(ModelErrors, SlidingWindowLayersAreRefused) {
  auto text = [](const std::string& extra) {
    return R"({"architectures": ["Qwen3ForCausalLM"], "vocab_size": 8, "hidden_size": 8, "intermediate_size": 8,
               "num_hidden_layers": 1, "num_attention_heads": 2, "head_dim": 4)" + extra + "}";
  };
  EXPECT_EQ(parse_model_config(text(""), "q3").head_dim, 4);
  EXPECT_TRUE(parse_model_config(text(""), "q3").qk_norm);
  expect_config_error([&] { parse_model_config(text(R"(, "use_sliding_window": true)"), "q3"); },
                      "use_sliding_window=true is not supported");
  expect_config_error([&] { parse_model_config(text(R"(, "layer_types": ["sliding_attention"])"), "q3"); },
                      "layer_types holds");
}

TEST(ModelErrors, LoraOnTheHeadOrEmbeddingIsRefusedWithTheWayOut) {
  auto model = load_causal_lm(fixture("qwen2_tiny").string(), LoadOptions{});
  LoraConfig c;
  c.target = parse_lora_target("q_proj,lm_head");
  expect_config_error([&] { apply_lora(*model, c); }, "name it in additional_target");
}

// peft's name rule: a full module name or a dotted suffix; only those modules get adapters.
TEST(ModelErrors, LoraTargetsByPeftNames) {
  auto model = load_causal_lm(fixture("qwen2_tiny").string(), LoadOptions{});
  LoraConfig c;
  c.target = parse_lora_target("self_attn.o_proj, model.layers.1.mlp.up_proj");
  apply_lora(*model, c);
  std::vector<std::string> names;
  for (const auto& p : lora_parameters(*model)) names.push_back(p.name);
  const std::string pre = "base_model.model.model.layers.";
  EXPECT_EQ(names, (std::vector<std::string>{pre + "0.self_attn.o_proj.lora_A.weight", pre + "0.self_attn.o_proj.lora_B.weight",
                                              pre + "1.self_attn.o_proj.lora_A.weight", pre + "1.self_attn.o_proj.lora_B.weight",
                                              pre + "1.mlp.up_proj.lora_A.weight", pre + "1.mlp.up_proj.lora_B.weight"}));
  auto other = load_causal_lm(fixture("qwen2_tiny").string(), LoadOptions{});
  c.target = parse_lora_target("proj");  // no dotted suffix of any name
  expect_config_error([&] { apply_lora(*other, c); }, "lora_target 'proj' names no module");
}

TEST(ModelErrors, LoraTargetNamingNoModule) {
  auto model = load_causal_lm(fixture("qwen2_tiny").string(), LoadOptions{});
  LoraConfig c;
  c.target = parse_lora_target("q_proj,qkv_proj");
  expect_config_error([&] { apply_lora(*model, c); }, "lora_target 'qkv_proj' names no module");
}

}  // namespace
}  // namespace lf::model
