#pragma once
// The LLaMA-Factory data arguments lf-train's data pipeline reads (same YAML
// keys, same defaults as llamafactory 0.9.5's DataArguments): the job plan's
// data section (lf/config/job_plan.h). The config builder is its one builder
// (lf::config::load_train_config(...).plan.data); model_name_or_path, stage and
// seed are derived there from the model, objective and top-level sections.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace lf {

struct DataArgs {
  std::vector<std::string> dataset;       // `dataset: a,b` (names in dataset_info.json)
  std::vector<std::string> eval_dataset;  // `eval_dataset:` (mutually exclusive with val_size)
  std::string dataset_dir = "data";
  std::string template_name;              // `template:`; empty -> "empty" (as LLaMA-Factory
                                          // does for tokenizers without a chat template)
  int64_t cutoff_len = 2048;
  bool train_on_prompt = false;
  bool mask_history = false;
  bool packing = false;
  bool neat_packing = false;  // packing without attention across the packed sequences (implies packing)
  std::optional<int64_t> max_samples;
  double val_size = 0.0;                  // fraction (< 1) or count (>= 1)
  std::string mix_strategy = "concat";    // concat | interleave_under | interleave_over
  std::vector<double> interleave_probs;   // empty: round robin
  std::optional<std::string> default_system;
  std::optional<std::string> tool_format;  // overrides the template's tool/function format
  bool enable_thinking = true;             // reasoning templates (qwen3)
  bool preserve_thinking = false;
  std::string tokenized_path;             // empty: no cache
  std::string model_name_or_path;         // folder with tokenizer.json
  std::string stage = "sft";
  uint64_t seed = 42;
  int preprocessing_num_workers = 0;      // threads here (0: all cores); no effect on results
  int64_t preprocessing_batch_size = 1000;  // packing happens within each batch, as in LLaMA-Factory
  std::string invalid_records = "warn";   // lf-train's own: warn | error on records that are dropped
  // Where relative paths in the YAML resolve from (the YAML's folder is NOT
  // used: LLaMA-Factory resolves against the working directory).
  std::filesystem::path base_dir = ".";

  std::filesystem::path resolve(const std::string& p) const;
};

}  // namespace lf
