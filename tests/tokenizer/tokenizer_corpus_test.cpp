// Parity on >= 10,000 generated texts (scripts/fixtures/make_tokenizer_corpus.py):
// ids and decoded strings must hash to what PyPI `tokenizers` produced.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "lf/common/hash.h"
#include "test_assets.h"

namespace lf {
namespace {

std::string short_hash(std::string_view bytes) {
  return fmt::format("{:08x}", fnv1a64(bytes) & 0xFFFFFFFFull);
}

std::string ids_hash(const std::vector<int32_t>& ids) {
  std::string bytes;
  for (int32_t id : ids)
    for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<char>((static_cast<uint32_t>(id) >> (8 * k)) & 0xFF));
  return short_hash(bytes);
}

TEST(TokenizerCorpus, TenThousandTextsMatchHfTokenizers) {
  LF_REQUIRE_ASSETS();
  const auto path = test::fixtures_dir() / "tokenizer" / "corpus.jsonl";
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "missing " << path
                         << "; regenerate with scripts/fixtures/make_tokenizer_corpus.py";
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(in, line);) records.push_back(nlohmann::json::parse(line));
  ASSERT_GE(records.size(), 10000u);
  std::vector<std::string> texts;
  for (const auto& r : records) texts.push_back(r["t"].get<std::string>());
  // "mistral@transformers": ids of transformers 5's AutoTokenizer, which
  // rebuilds LlamaTokenizer (TokenizerFlavor::kTransformers).
  const Tokenizer mistral_tf = Tokenizer::load(test::assets_dir() / "mistral", TokenizerFlavor::kTransformers);
  for (const char* name : {"qwen2", "llama3", "mistral", "gpt2", "mistral@transformers"}) {
    if (!records[0].contains(name)) {
      ADD_FAILURE() << "fixture has no " << name << " column; regenerate it";
      continue;
    }
    const Tokenizer& tok =
        std::string(name) == "mistral@transformers" ? mistral_tf : test::cached_tokenizer(name);
    auto all = tok.encode_batch(texts, false, 2);
    int id_failures = 0, decode_failures = 0;
    for (size_t i = 0; i < records.size(); ++i) {
      const std::string ref = records[i][name].get<std::string>();
      const auto c1 = ref.find(':'), c2 = ref.find(':', c1 + 1);
      const size_t want_n = std::stoul(ref.substr(0, c1));
      const std::string want_ids = ref.substr(c1 + 1, c2 - c1 - 1), want_dec = ref.substr(c2 + 1);
      const auto& ids = all[i];
      if (ids.size() != want_n || ids_hash(ids) != want_ids) {
        if (++id_failures <= 5)
          ADD_FAILURE() << name << " ids differ (want " << want_n << " ids) for text #" << i << " "
                        << nlohmann::json(texts[i]) << "\n got " << nlohmann::json(ids);
        continue;
      }
      std::string dec = tok.decode(ids);
      bool ok = want_dec == "=" ? dec == texts[i] : short_hash(dec) == want_dec;
      if (!ok && ++decode_failures <= 5)
        ADD_FAILURE() << name << " decode differs for text #" << i << " " << nlohmann::json(texts[i])
                      << "\n got " << nlohmann::json(dec);
    }
    EXPECT_EQ(id_failures, 0) << name;
    EXPECT_EQ(decode_failures, 0) << name;
  }
}

}  // namespace
}  // namespace lf
