#pragma once
// The training config: a LLaMA-Factory YAML (+ `key=value` overrides) parsed
// into the job plan (job_plan.h) with LLaMA-Factory's defaults and validated
// once, before anything heavy starts. Every key LLaMA-Factory / HF TrainingArguments
// accepts is known (src/config/llamafactory_keys.tsv, generated): implemented
// here, accepted with a warning when it has no effect, or refused with a
// ConfigError when ignoring it would change the result. Unknown keys are a
// ConfigError with a did-you-mean. Torch-free: used by lf-train and lf-worker.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lf/config/job_plan.h"

namespace lf::config {

struct LoadedConfig {
  JobPlan plan;
  // One line per key accepted without effect here ("report_to: wandb has no effect in lf-train ...").
  std::vector<std::string> warnings;
  // Information worth one line at start, not a warning ("fsdp_transformer_layer_cls_to_wrap: lf-train
  // wraps its own decoder layers").
  std::vector<std::string> notes;
  // The effective key/value pairs, sorted, and the content of every file a key names (a DeepSpeed
  // JSON): hashed to check that every node runs the same config.
  std::string canonical;
  // The same pairs one by one (the rendezvous names the keys that differ between nodes).
  std::vector<std::pair<std::string, std::string>> items;
};

// Parses YAML text (source_name is used in messages) plus `key=value` overrides.
LoadedConfig parse_train_config(const std::string& yaml_text, const std::vector<std::string>& overrides,
                                const std::string& source_name);
// Reads the file (ConfigError when missing/unreadable) and parses it.
LoadedConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides);

// Every key lf-train knows (LLaMA-Factory's + its own), for did-you-mean and docs.
const std::vector<std::string>& known_keys();

}  // namespace lf::config
