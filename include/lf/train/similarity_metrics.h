#pragma once
// LLaMA-Factory 0.9.5's ComputeSimilarity (train/sft/metric.py), the figures its predict runs write:
// per (prediction, label) pair, ROUGE-1/2/L F-scores of rouge_chinese's Rouge() over jieba-cut words and
// nltk's character-level sentence_bleu (4-grams, SmoothingFunction().method3), each x100 and rounded to 4
// decimals as Python's round() does; the run's figure is numpy's mean of them.
//
// jieba (jieba_cut.cpp): exact on text without Chinese characters (its dictionary holds five ASCII words,
// AT&T c# C# c++ C++, which are kept). A run of characters jieba segments with its dictionary and HMM
// (U+4E00..U+9FD5, with the ASCII letters, digits and +#&._%- next to them) that holds a Chinese
// character is cut here into single Chinese characters and jieba's ASCII words: ROUGE on Chinese text
// differs from LLaMA-Factory's (more, shorter words); BLEU (characters) is exact in every script.
// Torch-free; every function is pure and thread-safe.
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace lf::train {

// Python's list(str): the code points of UTF-8 text (an invalid byte becomes U+FFFD).
std::u32string utf8_code_points(std::string_view text);
std::string utf8_encode(std::u32string_view text);

// jieba.cut(text) (cut_all False, HMM True), within the limit above.
std::vector<std::u32string> jieba_cut(std::u32string_view text);

// nltk's sentence_bleu([reference], hypothesis, smoothing_function=SmoothingFunction().method3), on code points.
double sentence_bleu4(std::u32string_view reference, std::u32string_view hypothesis);

struct RougeScores {
  double rouge1 = 0, rouge2 = 0, rougel = 0;  // F-scores in [0, 1]
};
// rouge_chinese's Rouge().get_scores(hypothesis, reference)[0] (exclusive n-gram sets, summary-level LCS,
// its cut_sent sentence split), on space-joined words.
RougeScores rouge_scores(std::u32string_view hypothesis, std::u32string_view reference);

// Python's round(x, 4) (the correctly rounded decimal, back to the nearest double).
double round4(double x);

// One pair's ComputeSimilarity entries: "rouge-1", "rouge-2", "rouge-l", "bleu-4" (x100, round4).
std::map<std::string, double> similarity_scores(std::string_view prediction, std::string_view label);

// float(np.mean(values)) over float64: numpy's pairwise sum (blocks of 8, halves above 128), over n.
double numpy_mean(const std::vector<double>& values);

// The run's figures: each key's numpy_mean over the pairs (`predictions` and `labels` decoded texts).
std::map<std::string, double> compute_similarity(const std::vector<std::string>& predictions,
                                                 const std::vector<std::string>& labels);

}  // namespace lf::train
