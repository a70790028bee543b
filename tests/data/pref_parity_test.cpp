// The preference stages' rows against LLaMA-Factory 0.9.5's own processors (PairwiseDatasetProcessor and
// FeedbackDatasetProcessor with its KL pairs): tests/fixtures/data/pref_reference.jsonl, made by
// scripts/fixtures/make_pref_data_reference.py with configs/models/tiny's tokenizer on the repository's demo data.
// Then the bad inputs: a ranking dataset without a rejected column, a KTO dataset without tags, a
// non-ranking dataset under stage dpo: errors naming the dataset, the column and the record.
#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "data_test_util.h"
#include "lf/common/error.h"
#include "lf/data/sft_dataset.h"

namespace lf {
namespace {

std::filesystem::path source_dir() { return LF_SOURCE_DIR; }

std::vector<int32_t> row(const TokenizedDataset& d, size_t r, bool labels) {
  const auto s = labels ? d.labels(r) : d.input_ids(r);
  return {s.begin(), s.end()};
}

DataArgs args_of(const nlohmann::json& c) {
  DataArgs a;
  a.dataset = {c["dataset"].get<std::string>()};
  a.dataset_dir = (source_dir() / "data").string();
  a.template_name = c["template"].get<std::string>();
  a.cutoff_len = c["cutoff_len"].get<int64_t>();
  a.stage = c["stage"].get<std::string>();
  a.enable_thinking = c.value("enable_thinking", true);
  a.preprocessing_batch_size = c.value("preprocessing_batch_size", int64_t{1000});
  if (c.contains("max_samples")) a.max_samples = c["max_samples"].get<int64_t>();
  a.model_name_or_path = (source_dir() / "configs" / "models" / "tiny").string();
  return a;
}

TEST(PrefParity, RowsAreLlamaFactorys) {
  std::ifstream in(test::fixtures_dir() / "data" / "pref_reference.jsonl");
  ASSERT_TRUE(in.good()) << "missing pref_reference.jsonl; run scripts/fixtures/make_pref_data_reference.py";
  int cases = 0;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    const auto args = args_of(j["case"]);
    const auto tok = load_tokenizer_for(args);
    const auto data = load_sft_data(args, tok);
    const auto& rows = j["rows"];
    const bool kto = args.stage == "kto";
    ASSERT_EQ(data.train.group_size(), 2u);
    ASSERT_EQ(data.train.num_examples(), rows.size()) << j["case"].dump();
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      const char* first = kto ? "input_ids" : "chosen_input_ids";
      const char* second = kto ? "kl_input_ids" : "rejected_input_ids";
      EXPECT_EQ(row(data.train, 2 * i, false), r[first].get<std::vector<int32_t>>()) << j["case"].dump() << " #" << i;
      EXPECT_EQ(row(data.train, 2 * i, true), r[kto ? "labels" : "chosen_labels"].get<std::vector<int32_t>>());
      EXPECT_EQ(row(data.train, 2 * i + 1, false), r[second].get<std::vector<int32_t>>()) << j["case"].dump() << " #" << i;
      EXPECT_EQ(row(data.train, 2 * i + 1, true), r[kto ? "kl_labels" : "rejected_labels"].get<std::vector<int32_t>>());
      if (kto) {
        EXPECT_EQ(data.train.tag(i) != 0, r["kto_tags"].get<bool>()) << "#" << i;
      }
    }
    ++cases;
  }
  EXPECT_GE(cases, 9);
}

// A folder with data/'s files and one more dataset entry.
std::filesystem::path data_with(const std::string& name, const nlohmann::json& entry, const std::string& file,
                                const nlohmann::json& records) {
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("lf_pref_bad_{}_{}", name, ::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::copy(source_dir() / "data", dir, std::filesystem::copy_options::recursive);
  std::ifstream in(dir / "dataset_info.json");
  auto info = nlohmann::json::parse(in);
  info[name] = entry;
  std::ofstream(dir / "dataset_info.json") << info.dump();
  std::ofstream(dir / file) << records.dump();
  return dir;
}

std::string error_of(DataArgs args) {
  try {
    const auto tok = load_tokenizer_for(args);
    (void)load_sft_data(args, tok);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(PrefErrors, NameTheDatasetAndTheColumn) {
  auto args = args_of({{"dataset", "dpo_en_demo"}, {"template", "qwen"}, {"cutoff_len", 64}, {"stage", "dpo"}});
  const nlohmann::json pairs = {{{"instruction", "hi"}, {"chosen", "a"}, {"rejected", "b"}},
                                {{"instruction", "hi"}, {"chosen", "a"}}};
  args.dataset_dir = data_with("pairs", {{"file_name", "pairs.json"}, {"ranking", true},
                                         {"columns", {{"prompt", "instruction"}, {"chosen", "chosen"}, {"rejected", "rejected"}}}},
                               "pairs.json", pairs).string();
  args.dataset = {"pairs"};
  auto e = error_of(args);
  EXPECT_NE(e.find("ranking dataset 'pairs' has no 'rejected' column"), std::string::npos) << e;
  EXPECT_NE(e.find("pairs.json:"), std::string::npos) << e;  // the record
  args.dataset_dir = data_with("pairs", {{"file_name", "pairs.json"}, {"ranking", true},
                                         {"columns", {{"prompt", "instruction"}, {"chosen", "chosen"}}}},
                               "pairs.json", pairs).string();
  e = error_of(args);
  EXPECT_NE(e.find("maps no 'rejected' column"), std::string::npos) << e;
  args.dataset = {"alpaca_en_demo"};
  e = error_of(args);
  EXPECT_NE(e.find("dataset 'alpaca_en_demo' is not a ranking dataset"), std::string::npos) << e;
  args.stage = "kto";
  args.dataset_dir = data_with("untagged", {{"file_name", "u.json"}, {"columns", {{"prompt", "instruction"}}}},
                               "u.json", pairs).string();
  args.dataset = {"untagged"};
  e = error_of(args);
  EXPECT_NE(e.find("dataset 'untagged' maps no 'kto_tag' column"), std::string::npos) << e;
  args.dataset_dir = data_with("badtag", {{"file_name", "t.json"}, {"columns", {{"prompt", "instruction"},
                                          {"response", "chosen"}, {"kto_tag", "label"}}}},
                               "t.json", {{{"instruction", "hi"}, {"chosen", "a"}, {"label", "yes"}}}).string();
  args.dataset = {"badtag"};
  e = error_of(args);
  EXPECT_NE(e.find("KTO dataset 'badtag' has \"yes\" in its 'label' column"), std::string::npos) << e;
  args.stage = "sft";
  args.dataset = {"dpo_en_demo"};
  e = error_of(args);
  EXPECT_NE(e.find("dataset 'dpo_en_demo' is a ranking (preference) dataset; stage sft"), std::string::npos) << e;
}

}  // namespace
}  // namespace lf
