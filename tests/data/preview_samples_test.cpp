// The data preview node 0's live page shows (issue 35): the job's first examples through its
// template, as the rows training reads. Under sft and the preference stages (dpo's pairs, kto's tagged examples), every
// sample's token and trained counts equal the training row's (load_sft_data, the path training
// takes; its rows are checked against LLaMA-Factory by data_parity_test and pref_parity_test), and its
// segments alternate masked and trained text.
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data_test_util.h"
#include "lf/data/preview_samples.h"
#include "lf/data/sft_dataset.h"

namespace lf {
namespace {

std::filesystem::path source_dir() { return LF_SOURCE_DIR; }

DataArgs demo_args(const std::string& stage, const std::string& dataset) {
  DataArgs a;
  a.stage = stage;
  a.dataset = {dataset};
  a.dataset_dir = (source_dir() / "data").string();
  a.template_name = "qwen";
  a.cutoff_len = 1024;
  a.model_name_or_path = (source_dir() / "configs" / "models" / "tiny").string();
  return a;
}

int64_t trained_of(const TokenizedDataset& d, size_t row) {
  const auto labels = d.labels(row);
  return std::count_if(labels.begin(), labels.end(), [](int32_t l) { return l != kIgnoreIndex; });
}

// Sample k of the preview is training row `row` of the same data.
void expect_row(const PreviewSample& s, const TokenizedDataset& d, size_t row, const std::string& where) {
  ASSERT_FALSE(s.dropped) << where;
  EXPECT_EQ(s.tokens, static_cast<int64_t>(d.input_ids(row).size())) << where;
  EXPECT_EQ(s.trained, trained_of(d, row)) << where;
  ASSERT_GE(s.segments.size(), 2u) << where;
  EXPECT_TRUE(s.segments.front().masked) << where << ": the prompt comes first, masked";
  for (size_t i = 1; i < s.segments.size(); ++i)
    EXPECT_NE(s.segments[i].masked, s.segments[i - 1].masked) << where << " segment " << i;
}

TEST(PreviewSamples, SftSamplesAreTheTrainingRows) {
  const DataArgs args = demo_args("sft", "alpaca_en_demo");
  const auto data = load_sft_data(args, load_tokenizer_for(args));
  std::string tmpl;
  const auto samples = preview_samples(args, 3, &tmpl);
  EXPECT_EQ(tmpl, "qwen");
  ASSERT_EQ(samples.size(), 3u);
  for (size_t k = 0; k < samples.size(); ++k) {
    EXPECT_NE(samples[k].origin.find("alpaca_en_demo.json:"), std::string::npos) << samples[k].origin;
    expect_row(samples[k], data.train, k, "sft sample " + std::to_string(k));
  }
}

TEST(PreviewSamples, DpoShowsEachPairsChosenAndRejectedRows) {
  const DataArgs args = demo_args("dpo", "dpo_en_demo");
  const auto data = load_sft_data(args, load_tokenizer_for(args));
  ASSERT_EQ(data.train.group_size(), 2u);
  const auto samples = preview_samples(args, 2);
  ASSERT_EQ(samples.size(), 4u);  // two pairs
  for (size_t k = 0; k < samples.size(); ++k) {
    const std::string role = k % 2 == 0 ? " (chosen)" : " (rejected)";
    EXPECT_TRUE(samples[k].origin.ends_with(role)) << samples[k].origin;
    expect_row(samples[k], data.train, k, "dpo row " + std::to_string(k));
  }
  // A pair shares its prompt.
  EXPECT_EQ(samples[0].segments.front().text, samples[1].segments.front().text);
}

TEST(PreviewSamples, KtoShowsEachExamplesRowWithItsTag) {
  const DataArgs args = demo_args("kto", "kto_en_demo");
  const auto data = load_sft_data(args, load_tokenizer_for(args));
  const auto samples = preview_samples(args, 3);
  ASSERT_EQ(samples.size(), 3u);
  for (size_t k = 0; k < samples.size(); ++k) {
    EXPECT_TRUE(samples[k].origin.ends_with(" (desirable)") || samples[k].origin.ends_with(" (undesirable)"))
        << samples[k].origin;
    expect_row(samples[k], data.train, 2 * k, "kto row " + std::to_string(k));  // rows: target, KL
  }
}

}  // namespace
}  // namespace lf
