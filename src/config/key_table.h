#pragma once
// The keys that exist: LLaMA-Factory's (generated data, llamafactory_keys.tsv)
// and lf-train's own (declared in config_schema.cpp). How lf-train treats each
// one is the schema's business. Internal to src/config.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lf::config {

struct KeySpec {
  std::string name;
  std::string dataclass;  // ModelArguments, DataArguments, ..., or "lf-train"
  std::string type;
  std::string default_repr;  // Python repr of LLaMA-Factory's default
};

const std::vector<KeySpec>& key_specs();
const KeySpec* find_key(std::string_view name);
// Whether a YAML scalar text equals a Python default repr ('none', None, False, 5e-05, []...).
bool equals_python_default(const std::string& yaml_value, const std::string& default_repr);

}  // namespace lf::config
