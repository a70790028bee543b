// Parity with the reference ids in ../shared/assets/tokenizers/golden-public.jsonl
// (made by HF's Rust core), decode round trips, special tokens, post-processing.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "test_assets.h"

namespace lf {
namespace {

using test::cached_tokenizer;

TEST(TokenizerGolden, AllPublicReferenceIdsMatch) {
  LF_REQUIRE_ASSETS();
  std::ifstream in(test::assets_dir() / "golden-public.jsonl");
  ASSERT_TRUE(in.good());
  std::string line;
  int checked = 0, failed = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    const Tokenizer& tok = cached_tokenizer(j["tokenizer"].get<std::string>());
    auto want = j["ids"].get<std::vector<int32_t>>();
    auto got = tok.encode(j["text"].get<std::string>(), false);
    ++checked;
    if (got != want) {
      ++failed;
      ADD_FAILURE() << j["tokenizer"] << " text " << j["text"] << "\n want "
                    << nlohmann::json(want) << "\n got  " << nlohmann::json(got);
    }
  }
  EXPECT_EQ(failed, 0);
  EXPECT_GE(checked, 87);
}

TEST(TokenizerGolden, DecodeRoundTrips) {
  LF_REQUIRE_ASSETS();
  const std::vector<std::string> texts = {
      "Hello, world! How's it going?  Fine.\n\n  indented\tTab 12345",
      "分布式训练可以显著缩短大模型的微调时间。", "emoji: 😀🚀👍🏽", "   ", "",
      "<|im_start|>user\nhi<|im_end|>", "a\u200bb\u00a0c"};
  for (const char* name : {"qwen2", "llama3", "gpt2"}) {
    const Tokenizer& tok = cached_tokenizer(name);
    for (const auto& t : texts) {
      if (std::string(name) != "qwen2" && t.find("<|im_start|>") != std::string::npos) continue;
      EXPECT_EQ(tok.decode(tok.encode(t)), t) << name;
    }
  }
  const Tokenizer& mistral = cached_tokenizer("mistral");
  for (const auto& t : texts) {
    if (t.find("<|") != std::string::npos) continue;
    EXPECT_EQ(mistral.decode(mistral.encode(t)), t) << "mistral";
  }
}

TEST(TokenizerSpecial, AddedTokensMatchedAndPostProcessorApplied) {
  LF_REQUIRE_ASSETS();
  const Tokenizer& qwen = cached_tokenizer("qwen2");
  EXPECT_EQ(qwen.token_to_id("<|im_start|>"), 151644);
  EXPECT_EQ(qwen.encode("<|im_start|><|im_end|>"), (std::vector<int32_t>{151644, 151645}));
  EXPECT_EQ(qwen.eos_id(), 151645);
  EXPECT_EQ(qwen.pad_id(), 151643);
  EXPECT_FALSE(qwen.bos_id().has_value());
  EXPECT_TRUE(qwen.is_special(151644));
  EXPECT_EQ(qwen.decode(qwen.encode("<|im_start|>hi"), true), "hi");

  const Tokenizer& mistral = cached_tokenizer("mistral");
  auto plain = mistral.encode("Hello", false);
  auto with = mistral.encode("Hello", true);
  ASSERT_EQ(with.size(), plain.size() + 1);
  EXPECT_EQ(with[0], 1);  // <s> from TemplateProcessing
  EXPECT_EQ(mistral.bos_id(), 1);
  EXPECT_EQ(mistral.eos_id(), 2);

  const Tokenizer& llama3 = cached_tokenizer("llama3");
  EXPECT_EQ(llama3.bos_id(), 128000);
  EXPECT_EQ(llama3.encode("Hello", true), llama3.encode("Hello", false));  // ByteLevel post: no ids
}

TEST(TokenizerBatch, MatchesSequentialEncodeOnTwoThreads) {
  LF_REQUIRE_ASSETS();
  const Tokenizer& tok = cached_tokenizer("llama3");
  std::vector<std::string> texts;
  for (int i = 0; i < 500; ++i) texts.push_back("sample " + std::to_string(i * 7919) + " text ✓ 例子");
  auto batch = tok.encode_batch(texts, false, 2);
  ASSERT_EQ(batch.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) ASSERT_EQ(batch[i], tok.encode(texts[i])) << i;
}

TEST(TokenizerGpt2, EncoderJsonAndVocabBpeLoad) {
  LF_REQUIRE_ASSETS();
  const Tokenizer& gpt2 = cached_tokenizer("gpt2");
  EXPECT_EQ(gpt2.vocab_size(), 50257);
  // "Hello world" is [15496, 995] in GPT-2.
  EXPECT_EQ(gpt2.encode("Hello world"), (std::vector<int32_t>{15496, 995}));
  EXPECT_EQ(gpt2.encode("<|endoftext|>"), (std::vector<int32_t>{50256}));
}

}  // namespace
}  // namespace lf

namespace lf {
namespace {

TEST(TokenizerFlavor, TransformersRebuildsLlamaTokenizerWithMetaspace) {
  LF_REQUIRE_ASSETS();
  // Reference ids from transformers 5.6 AutoTokenizer (what LLaMA-Factory 0.9.5
  // installs) and from `tokenizers` on the raw tokenizer.json.
  Tokenizer hf = Tokenizer::load(test::assets_dir() / "mistral", TokenizerFlavor::kTransformers);
  const Tokenizer& raw = test::cached_tokenizer("mistral");
  EXPECT_EQ(hf.encode("a </s> and"), (std::vector<int32_t>{264, 28705, 2, 304}));
  EXPECT_EQ(raw.encode("a </s> and"), (std::vector<int32_t>{264, 28705, 2, 28705, 304}));
  EXPECT_EQ(hf.encode(" and"), (std::vector<int32_t>{304}));
  EXPECT_EQ(hf.encode("Hello"), raw.encode("Hello"));
  EXPECT_NE(hf.fingerprint(), raw.fingerprint());
  // Byte-level tokenizers are unchanged.
  Tokenizer q = Tokenizer::load(test::assets_dir() / "qwen2", TokenizerFlavor::kTransformers);
  EXPECT_EQ(q.encode(" a </s> and"), test::cached_tokenizer("qwen2").encode(" a </s> and"));
}

}  // namespace
}  // namespace lf
