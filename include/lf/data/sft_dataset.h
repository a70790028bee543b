#pragma once
// The whole SFT data path, as LLaMA-Factory's get_dataset(stage="sft") runs it:
// dataset_info.json -> files (JSON, JSONL, Parquet) -> converter -> max_samples
// -> merge (concat, or interleave as HF datasets does) -> val_size split (numpy's
// permutation, bit-exact) -> template + supervised preprocessing (or packing),
// with a tokenized cache under tokenized_path keyed by tokenizer, template,
// cutoff_len, flags and file contents.
//
// Trainer use: DataArgs from the config -> load_tokenizer_for -> load_sft_data;
// then SftData::train.input_ids(i) / labels(i) (-100 = not trained) and pad_id.
#include <cstdint>
#include <vector>

#include "lf/data/chat_template.h"
#include "lf/data/data_args.h"
#include "lf/data/drop_report.h"
#include "lf/data/example.h"
#include "lf/data/tokenized_dataset.h"
#include "lf/tokenizer/tokenizer.h"

namespace lf {

class NumpyLegacyRandom;  // numpy's global RNG stand-in (num_samples), src/data/numpy_random.h

struct SftData {
  TokenizedDataset train;
  TokenizedDataset eval;  // empty unless val_size or eval_dataset
  int32_t pad_id = 0;     // LLaMA-Factory's pad token (eos when the tokenizer has none)
  int32_t eos_id = 0;     // after the template's replace_eos
  uint64_t cache_key = 0;
  bool from_cache = false;
  DropReport dropped;  // records no example could be made of (train and eval; none from a cache)
};

// The template `args` names; unset is "empty" as in LLaMA-Factory, except that
// a tokenizer with a Jinja chat_template is an error (LLaMA-Factory would parse
// that template; lf-train asks for an explicit name instead).
ChatTemplate resolve_template(const DataArgs& args, const Tokenizer& tokenizer);
TemplateOptions template_options(const DataArgs& args);

// Converted examples of `names` (num_samples and max_samples each, merged per
// mix_strategy). `global_rng` carries numpy's global RNG across calls (null:
// a fresh one seeded with args.seed). Throws ConfigError with file:line for
// malformed records.
std::vector<Example> load_examples(const DataArgs& args, const std::vector<std::string>& names,
                                   NumpyLegacyRandom* global_rng = nullptr);

// Tokenizer at args.model_name_or_path, in the transformers flavor (the ids
// LLaMA-Factory gets from AutoTokenizer).
Tokenizer load_tokenizer_for(const DataArgs& args);

// Key over tokenizer fingerprint, template, cutoff_len, flags, seed, val_size,
// max_samples and the bytes of every data file.
uint64_t sft_cache_key(const DataArgs& args, const Tokenizer& tokenizer);

// Loads the cache when its key matches, else tokenizes (on all cores) and,
// if tokenized_path is set, writes it. Throws ConfigError on an empty result.
// Processes sharing tokenized_path (ranks of one node, or all nodes on a shared
// filesystem with flock) serialize on tokenized_path/.lock: the first one
// tokenizes, the others wait (up to `lock_timeout_s`) and load its cache.
SftData load_sft_data(const DataArgs& args, const Tokenizer& tokenizer, double lock_timeout_s = 3600);

// The rows a stage trains on (no cache, no split): encode_examples' for sft and pt, the preference
// stages' pairs for dpo, kto and rm (pairwise.h).
TokenizedDataset encode_dataset(const std::vector<Example>& examples, const ChatTemplate& tmpl, const DataArgs& args);

// Tokenizes already-converted examples (no cache, no split).
std::vector<EncodedExample> encode_examples(const std::vector<Example>& examples,
                                            const ChatTemplate& tmpl, const DataArgs& args);

}  // namespace lf
