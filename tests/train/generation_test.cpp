// lf-train's generate (lf/train/generation.h: the key/value cache, left padding, HF's logits processors)
// against transformers' generate on small random Qwen2 / Qwen3 / Llama models (fp32 CPU,
// scripts/fixtures/make_generation_reference.py): the same greedy tokens, and from the same seed the same
// sampled ones.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "lf/model/loader.h"
#include "lf/train/generation.h"

namespace lf::train {
namespace {

const std::filesystem::path kDir = std::filesystem::path(LF_TRAIN_FIXTURES) / "generation";

nlohmann::json expected() {
  std::ifstream in(kDir / "expected.json");
  EXPECT_TRUE(in.good()) << "run scripts/fixtures/make_generation_reference.py";
  return nlohmann::json::parse(in);
}

GenerationConfig config_of(const nlohmann::json& e, bool sample) {
  GenerationConfig c;
  c.do_sample = sample;
  c.max_new_tokens = e["max_new_tokens"];
  c.eos_ids = e["eos_ids"].get<std::vector<int32_t>>();
  c.pad_id = e["pad_id"];
  if (sample) {
    const auto& s = e["sample_config"];
    c.temperature = s["temperature"];
    c.top_k = s["top_k"];
    c.top_p = s["top_p"];
    c.repetition_penalty = s["repetition_penalty"];
  }
  return c;
}

TEST(Generation, GreedyAndSampledTokensAreTransformers) {
  const auto all = expected();
  ASSERT_EQ(all.size(), 3u);
  for (const auto& [family, e] : all.items()) {
    SCOPED_TRACE(family);
    const auto model = model::load_causal_lm((kDir / family).string(), model::LoadOptions{});
    const auto prompts = e["prompts"].get<std::vector<std::vector<int32_t>>>();
    EXPECT_EQ(generate(*model, prompts, config_of(e, false)), e["greedy"].get<std::vector<std::vector<int32_t>>>());
    at::Generator gen = at::detail::createCPUGenerator(e["seed"].get<uint64_t>());
    EXPECT_EQ(generate(*model, prompts, config_of(e, true), &gen),
              e["sampled"].get<std::vector<std::vector<int32_t>>>());
  }
}

// A row alone and in a padded batch generate the same tokens (the cache, the mask and the positions agree).
TEST(Generation, BatchingDoesNotChangeARow) {
  const auto all = expected();
  const auto& e = all["qwen3"];
  const auto model = model::load_causal_lm((kDir / "qwen3").string(), model::LoadOptions{});
  const auto prompts = e["prompts"].get<std::vector<std::vector<int32_t>>>();
  const auto batch = generate(*model, prompts, config_of(e, false));
  for (size_t r = 0; r < prompts.size(); ++r) {
    auto alone = generate(*model, {prompts[r]}, config_of(e, false))[0];
    auto in_batch = batch[r];
    in_batch.resize(alone.size());
    EXPECT_EQ(alone, in_batch) << "row " << r;
  }
}

}  // namespace
}  // namespace lf::train
