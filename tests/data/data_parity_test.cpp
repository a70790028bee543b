// Template + supervised preprocessing parity with LLaMA-Factory 0.9.5 itself:
// tests/fixtures/data/reference.jsonl is produced by its own code
// (scripts/fixtures/make_data_reference.py) with the real tokenizers.
#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "data_test_util.h"
#include "lf/common/hash.h"
#include "lf/data/chat_template.h"
#include "lf/data/sft_dataset.h"
#include "lf/data/supervised.h"
#include "tool_format.h"

namespace lf {
namespace {

std::string hash_ids(const std::vector<int32_t>& v) {
  std::string bytes;
  for (int32_t x : v)
    for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<char>((static_cast<uint32_t>(x) >> (8 * k)) & 0xFF));
  return fmt::format("{:016x}", fnv1a64(bytes));
}

TEST(DataParity, InferSeqlenMatchesLlamaFactory) {
  EXPECT_EQ(infer_seqlen(10, 10, 100), (std::pair<int64_t, int64_t>{10, 10}));
  EXPECT_EQ(infer_seqlen(100, 10, 50), (std::pair<int64_t, int64_t>{40, 10}));
  EXPECT_EQ(infer_seqlen(10, 100, 50), (std::pair<int64_t, int64_t>{10, 40}));
  EXPECT_EQ(infer_seqlen(60, 40, 50), (std::pair<int64_t, int64_t>{30, 20}));
  EXPECT_EQ(infer_seqlen(70, 30, 33), (std::pair<int64_t, int64_t>{24, 9}));
  EXPECT_EQ(infer_seqlen(5, 5, 0), (std::pair<int64_t, int64_t>{0, 0}));
}

TEST(DataParity, AllReferenceCasesFromLlamaFactoryMatch) {
  LF_REQUIRE_ASSETS();
  set_tool_prompt_date("02 Jan 2026");  // as pinned by make_data_reference.py
  std::ifstream in(test::fixtures_dir() / "data" / "reference.jsonl");
  ASSERT_TRUE(in.good()) << "missing reference.jsonl; run scripts/fixtures/make_data_reference.py";
  int cases = 0, failures = 0;
  for (std::string line; std::getline(in, line);) {
    auto ref = nlohmann::json::parse(line);
    DataArgs args;
    args.dataset_dir = ref.contains("dataset_dir")
                           ? (std::filesystem::path(LF_SOURCE_DIR) / ref["dataset_dir"].get<std::string>()).string()
                           : (test::fixtures_dir() / "data").string();
    args.template_name = ref["template"];
    args.cutoff_len = ref["cutoff_len"];
    args.train_on_prompt = ref["train_on_prompt"];
    args.mask_history = ref["mask_history"];
    args.packing = ref["packing"];
    if (ref.contains("tool_format")) args.tool_format = ref["tool_format"].get<std::string>();
    if (ref.contains("default_system")) args.default_system = ref["default_system"].get<std::string>();
    const Tokenizer& tok = test::data_tokenizer(ref["tokenizer"]);
    if (ref.contains("enable_thinking")) args.enable_thinking = ref["enable_thinking"].get<bool>();
    ChatTemplate tmpl(args.template_name, tok, template_options(args));
    auto examples = load_examples(args, {ref["dataset"].get<std::string>()});
    auto got = encode_examples(examples, tmpl, args);
    std::string name = line.substr(0, line.find("\"n\":") < line.find("\"input_ids\"") ? line.find("\"n\":")
                                                                                     : line.find("\"input_ids\""));
    ++cases;
    if (ref.contains("ids_hashes")) {  // shipped demo data: per-example hashes
      auto ids_h = ref["ids_hashes"].get<std::vector<std::string>>();
      auto labels_h = ref["labels_hashes"].get<std::vector<std::string>>();
      if (got.size() != ids_h.size()) {
        ++failures;
        ADD_FAILURE() << name << ": " << got.size() << " examples, want " << ids_h.size();
        continue;
      }
      for (size_t i = 0; i < got.size(); ++i) {
        if (hash_ids(got[i].input_ids) != ids_h[i] || hash_ids(got[i].labels) != labels_h[i]) {
          ++failures;
          ADD_FAILURE() << name << " example " << i << " differs; got ids " << nlohmann::json(got[i].input_ids);
          break;
        }
      }
      continue;
    }
    auto want_ids = ref["input_ids"].get<std::vector<std::vector<int32_t>>>();
    auto want_labels = ref["labels"].get<std::vector<std::vector<int32_t>>>();
    if (got.size() != want_ids.size()) {
      ++failures;
      ADD_FAILURE() << name << ": " << got.size() << " examples, want " << want_ids.size();
      continue;
    }
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i].input_ids != want_ids[i] || got[i].labels != want_labels[i]) {
        ++failures;
        ADD_FAILURE() << name << " example " << i << "\n want ids " << nlohmann::json(want_ids[i])
                      << "\n got  ids " << nlohmann::json(got[i].input_ids) << "\n want labels "
                      << nlohmann::json(want_labels[i]) << "\n got  labels "
                      << nlohmann::json(got[i].labels);
        break;
      }
    }
  }
  set_tool_prompt_date("");
  EXPECT_GE(cases, 200);
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace lf

#include "lf/data/pretrain.h"

namespace lf {
namespace {

// stage: pt against LLaMA-Factory 0.9.5's own PretrainDatasetProcessor, mapped in batches of
// preprocessing_batch_size as its loader maps it, and its pt collator's labels
// (tests/fixtures/data/pt_reference.jsonl, scripts/fixtures/make_pt_reference.py): eos per text,
// packed blocks, or truncated texts. No bos anywhere: transformers 5 reads add_bos_token False for
// every tokenizer.json, also mistral's, whose tokenizer_config.json says true (checked here).
TEST(DataParity, PretrainMatchesLlamaFactorysProcessor) {
  LF_REQUIRE_ASSETS();
  std::ifstream in(test::fixtures_dir() / "data" / "pt_reference.jsonl");
  ASSERT_TRUE(in.good()) << "missing pt_reference.jsonl; run scripts/fixtures/make_pt_reference.py";
  int cases = 0, bos_cases = 0;
  for (std::string line; std::getline(in, line);) {
    const auto ref = nlohmann::json::parse(line);
    DataArgs args;
    args.stage = "pt";
    args.dataset_dir = (test::fixtures_dir() / "data").string();
    args.template_name = ref["template"];
    args.cutoff_len = ref["cutoff_len"];
    args.packing = ref["packing"];
    args.preprocessing_batch_size = ref["preprocessing_batch_size"];
    const Tokenizer& tok = test::data_tokenizer(ref["tokenizer"]);
    const std::string name = fmt::format("{}/{} cutoff {} packing {} batch {}", ref["tokenizer"].get<std::string>(),
                                         args.template_name, args.cutoff_len, args.packing,
                                         args.preprocessing_batch_size);
    SCOPED_TRACE(name);
    EXPECT_FALSE(ref["add_bos_token"].get<bool>());
    bos_cases += tok.add_bos_token();  // tokenizer_config.json's flag, which transformers 5 drops
    ChatTemplate tmpl(args.template_name, tok, template_options(args));
    const auto got = encode_examples(load_examples(args, {ref["dataset"].get<std::string>()}), tmpl, args);
    const auto want_ids = ref["input_ids"].get<std::vector<std::vector<int32_t>>>();
    const auto want_labels = ref["labels"].get<std::vector<std::vector<int32_t>>>();
    ASSERT_EQ(got.size(), want_ids.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].input_ids, want_ids[i]) << "row " << i;
      EXPECT_EQ(got[i].labels, want_labels[i]) << "row " << i;
    }
    ++cases;
  }
  EXPECT_GE(cases, 16);
  EXPECT_GT(bos_cases, 0) << "no tokenizer whose tokenizer_config.json sets add_bos_token among the cases";
}

}  // namespace
}  // namespace lf
