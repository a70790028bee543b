#pragma once
// JSON the config points at: a key whose value is a path to a JSON file (DeepSpeed's
// config, HF's fsdp_config) or an inline YAML mapping. Internal to src/config.
#include <nlohmann/json.hpp>

#include <string>

#include "config_reader.h"

namespace lf::config {

struct JsonInput {
  nlohmann::json value;   // an object
  std::string label;      // the path as the YAML gives it, or "(inline mapping)"
  std::string path;       // the file read ("" for a mapping)
};

// The key's value as a JSON object. A relative path is resolved against the working
// directory, as LLaMA-Factory and HF do; ConfigError when the file does not exist (with
// a hint when it exists beside the config, config_dir), is a folder or unreadable, is
// not valid JSON (line:column), repeats a key (DeepSpeed refuses that too), or is not
// an object.
JsonInput read_json_input(const Reader& r, const std::string& key, const std::string& config_dir);

// YAML -> JSON with YAML's scalar typing (true/false, null, integers, numbers, text).
nlohmann::json yaml_to_json(const YAML::Node& n);

// "5e8", "true", "\"auto\"", {"a": 1} as one line (JSON), for messages.
std::string json_text(const nlohmann::json& v);

}  // namespace lf::config
