// Parity on >= 10,000 generated texts (scripts/fixtures/make_tokenizer_corpus.py):
// ids and decoded strings must hash to what PyPI `tokenizers` produced.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <unistd.h>

#include <filesystem>
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

namespace lf {
namespace {

// variants.jsonl (scripts/fixtures/make_variant_fixture.py): the real files with
// other pipeline stages swapped in (Digits, NFKC, Lowercase, Metaspace
// pre-tokenizer/decoder, string Split with MergedWithPrevious); ids and decoded
// strings from PyPI `tokenizers` on the first 300 corpus texts.
TEST(TokenizerCorpus, PipelineVariantsMatchHfTokenizers) {
  LF_REQUIRE_ASSETS();
  std::ifstream corpus(test::fixtures_dir() / "tokenizer" / "corpus.jsonl");
  std::vector<std::string> texts;
  for (std::string line; texts.size() < 300 && std::getline(corpus, line);)
    texts.push_back(nlohmann::json::parse(line)["t"].get<std::string>());
  std::ifstream in(test::fixtures_dir() / "tokenizer" / "variants.jsonl");
  ASSERT_TRUE(in.good());
  int variants = 0;
  for (std::string line; std::getline(in, line);) {
    auto v = nlohmann::json::parse(line);
    std::ifstream base_file(test::assets_dir() / v["base"].get<std::string>() / "tokenizer.json");
    auto base = nlohmann::json::parse(base_file);
    for (auto it = v["patch"].begin(); it != v["patch"].end(); ++it) base[it.key()] = it.value();
    auto dir = std::filesystem::temp_directory_path() /
               ("lf_variant_" + v["name"].get<std::string>() + "_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "tokenizer.json") << base.dump();
    Tokenizer tok = Tokenizer::load(dir / "tokenizer.json");
    auto want_ids = v["ids"].get<std::vector<std::vector<int32_t>>>();
    auto want_dec = v["decoded"].get<std::vector<std::string>>();
    ASSERT_EQ(want_ids.size(), texts.size());
    int failures = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      auto ids = tok.encode(texts[i]);
      if (ids != want_ids[i] && ++failures <= 3)
        ADD_FAILURE() << v["name"] << " text #" << i << " " << nlohmann::json(texts[i]) << "\n want "
                      << nlohmann::json(want_ids[i]) << "\n got  " << nlohmann::json(ids);
      if (ids == want_ids[i] && tok.decode(ids) != want_dec[i] && ++failures <= 3)
        ADD_FAILURE() << v["name"] << " decode #" << i << " want " << nlohmann::json(want_dec[i]) << " got "
                      << nlohmann::json(tok.decode(ids));
    }
    EXPECT_EQ(failures, 0) << v["name"];
    std::filesystem::remove_all(dir);
    ++variants;
  }
  EXPECT_GE(variants, 5);
}

}  // namespace
}  // namespace lf
