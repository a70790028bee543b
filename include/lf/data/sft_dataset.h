#pragma once
// The whole SFT data path, as LLaMA-Factory's get_dataset(stage="sft") runs it:
// dataset_info.json -> files -> converter -> max_samples -> merge (concat) ->
// val_size split -> template + supervised preprocessing (or packing), with a
// tokenized cache under tokenized_path keyed by tokenizer, template,
// cutoff_len, flags and file contents.
#include <cstdint>
#include <vector>

#include "lf/data/data_args.h"
#include "lf/data/example.h"
#include "lf/data/tokenized_dataset.h"
#include "lf/tokenizer/tokenizer.h"

namespace lf {

struct SftData {
  TokenizedDataset train;
  TokenizedDataset eval;  // empty unless val_size or eval_dataset
  uint64_t cache_key = 0;
  bool from_cache = false;
};

// Converted examples of `names` (dataset_info.json order, max_samples each,
// concatenated). Throws ConfigError with file:line for malformed records.
std::vector<Example> load_examples(const DataArgs& args, const std::vector<std::string>& names);

// Tokenizer at args.model_name_or_path.
Tokenizer load_tokenizer_for(const DataArgs& args);

// Key over tokenizer fingerprint, template, cutoff_len, flags, seed, val_size,
// max_samples and the bytes of every data file.
uint64_t sft_cache_key(const DataArgs& args, const Tokenizer& tokenizer);

// Loads the cache when its key matches, else tokenizes (on all cores) and,
// if tokenized_path is set, writes it. Throws ConfigError on an empty result.
SftData load_sft_data(const DataArgs& args, const Tokenizer& tokenizer);

// Tokenizes already-converted examples (no cache, no split).
std::vector<EncodedExample> encode_examples(const std::vector<Example>& examples,
                                            const ChatTemplate& tmpl, const DataArgs& args);

}  // namespace lf
