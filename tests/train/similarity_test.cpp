// LLaMA-Factory's ComputeSimilarity (lf/train/similarity_metrics.h) against its own figures on text pairs
// (tests/fixtures/train/lf_predict/expected.json "similarity", scripts/fixtures/lf_predict_reference.py: nltk,
// rouge_chinese, jieba and numpy in the reference venv).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "lf/train/similarity_metrics.h"

namespace {

using lf::train::utf8_code_points;

const nlohmann::json& similarity() {
  static const nlohmann::json j = [] {
    std::ifstream in(std::string(LF_TRAIN_FIXTURES) + "/lf_predict/expected.json");
    return nlohmann::json::parse(in)["similarity"];
  }();
  return j;
}

TEST(Similarity, JiebaCutsTextWithoutChineseAsJieba) {
  for (const auto& c : similarity()["jieba"]) {
    std::vector<std::string> got;
    for (const auto& w : lf::train::jieba_cut(utf8_code_points(c[0].get<std::string>())))
      got.push_back(lf::train::utf8_encode(w));
    EXPECT_EQ(got, c[1].get<std::vector<std::string>>()) << c[0];
  }
}

TEST(Similarity, PerPairScoresAreComputeSimilaritys) {
  const auto& s = similarity();
  const auto& pairs = s["pairs"];
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto got = lf::train::similarity_scores(pairs[i][0].get<std::string>(), pairs[i][1].get<std::string>());
    for (const char* k : {"rouge-1", "rouge-2", "rouge-l", "bleu-4"})
      EXPECT_EQ(got.at(k), s["scores"][k][i].get<double>()) << k << " of pair " << i << ": " << pairs[i];
  }
}

TEST(Similarity, MeansAreNumpys) {
  const auto& s = similarity();
  std::vector<std::string> preds, labels;
  for (const auto& p : s["pairs"]) {
    preds.push_back(p[0]);
    labels.push_back(p[1]);
  }
  const auto got = lf::train::compute_similarity(preds, labels);
  for (const auto& [k, v] : s["means"].items()) EXPECT_EQ(got.at(k), v.get<double>()) << k;
  const auto values = s["numpy_mean"]["values"].get<std::vector<double>>();
  for (const auto& [n, want] : s["numpy_mean"]["means"].items()) {
    const std::vector<double> head(values.begin(), values.begin() + std::stoi(n));
    EXPECT_EQ(lf::train::numpy_mean(head), want.get<double>()) << n << " values";
  }
}

TEST(Similarity, BleuAndRoundAsPython) {
  // Identical texts: every precision 1, no brevity penalty.
  EXPECT_DOUBLE_EQ(lf::train::sentence_bleu4(utf8_code_points("abcdef"), utf8_code_points("abcdef")), 1.0);
  // No matching character: nltk returns 0 before smoothing.
  EXPECT_EQ(lf::train::sentence_bleu4(utf8_code_points("abc"), utf8_code_points("xyz")), 0.0);
  EXPECT_EQ(lf::train::round4(12.34565), 12.3456);  // the binary value lies below the half: Python rounds down
  EXPECT_EQ(lf::train::round4(0.00005), 0.0001);
}

TEST(Similarity, ChineseCharactersAreCutOneByOne) {
  // The documented difference: jieba would keep dictionary words ("你好"); lf-train cuts each character.
  std::vector<std::string> got;
  for (const auto& w : lf::train::jieba_cut(utf8_code_points("你好abc世界")))
    got.push_back(lf::train::utf8_encode(w));
  EXPECT_EQ(got, (std::vector<std::string>{"你", "好", "abc", "世", "界"}));
}

}  // namespace
