#pragma once
// dataset_dir/dataset_info.json: the registry mapping a dataset name to its
// file and format, exactly as LLaMA-Factory's parser.DatasetAttr reads it.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace lf {

enum class DataFormat { kAlpaca, kSharegpt };

struct DatasetAttr {
  std::string name;
  std::filesystem::path path;  // file or folder (shards) under dataset_dir
  DataFormat formatting = DataFormat::kAlpaca;
  bool ranking = false;
  std::optional<int64_t> num_samples;
  // Column names (columns:), empty when unset.
  std::string prompt = "instruction", query = "input", response = "output";
  std::string history, messages = "conversations", system, tools;
  // Preference data: a ranking dataset's chosen / rejected response columns, a KTO dataset's
  // boolean tag column (true: desirable). Empty when unset (LLaMA-Factory's None).
  std::string chosen, rejected, kto_tag;
  // sharegpt tags (tags:).
  std::string role_tag = "from", content_tag = "value", user_tag = "human",
              assistant_tag = "gpt", observation_tag = "observation",
              function_tag = "function_call", system_tag = "system";
};

// Throws ConfigError listing the known names when a name is missing, and
// naming hub datasets (hf_hub_url/ms_hub_url) as unsupported offline.
std::vector<DatasetAttr> load_dataset_list(const std::vector<std::string>& names,
                                           const std::filesystem::path& dataset_dir);

}  // namespace lf
