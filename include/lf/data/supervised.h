#pragma once
// LLaMA-Factory's supervised (SFT) preprocessing: per-turn truncation to
// cutoff_len with infer_seqlen's source/target budget, IGNORE_INDEX (-100)
// labels on prompts unless train_on_prompt, mask_history, and greedy-knapsack
// packing. Pure functions; thread-safe.
#include <cstdint>
#include <utility>
#include <vector>

#include "lf/data/chat_template.h"
#include "lf/data/example.h"

namespace lf {

constexpr int32_t kIgnoreIndex = -100;

struct SupervisedOptions {
  int64_t cutoff_len = 2048;
  bool train_on_prompt = false;
  bool mask_history = false;
};

struct EncodedExample {
  std::vector<int32_t> input_ids;
  std::vector<int32_t> labels;
  // Packed rows only: per token, 1 + the index of its sequence in the pack, 0 for padding; empty
  // otherwise. LLaMA-Factory's position_ids restart at each sequence with packing, neat or not;
  // under neat_packing these are its attention_mask "with indices" (TokenizedDataset::neat).
  std::vector<int32_t> segment_ids = {};
};

// processor_utils.infer_seqlen.
std::pair<int64_t, int64_t> infer_seqlen(int64_t source_len, int64_t target_len, int64_t cutoff_len);

// False (and nothing encoded) for the examples LLaMA-Factory drops: an even
// prompt count or not exactly one response.
bool encode_supervised(const Example& example, const ChatTemplate& tmpl,
                       const SupervisedOptions& options, EncodedExample& out);

// PackedSupervisedDatasetProcessor: drops examples longer than cutoff_len,
// packs by greedy knapsack, pads each pack to cutoff_len + 1 with pad_id, and records each
// token's segment_ids. (LLaMA-Factory's cutoff_len here is the YAML's minus 1: config_rules.cpp.)
std::vector<EncodedExample> pack_examples(std::vector<EncodedExample> examples, int64_t cutoff_len,
                                          int32_t pad_id);

}  // namespace lf
