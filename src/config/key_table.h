#pragma once
// The keys LLaMA-Factory accepts (generated data, llamafactory_keys.tsv) and
// how lf-train treats each one. Internal to src/config.
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

enum class KeyPolicy {
  kImplemented,  // read into TrainConfig
  kRefused,      // a non-default value would change the result: ConfigError
  kNoEffect,     // accepted; a non-default value gets a warning
};

const std::vector<KeySpec>& key_specs();
const KeySpec* find_key(std::string_view name);
KeyPolicy key_policy(std::string_view name);
// Why a refused key is refused (and what to do instead).
std::string refusal_reason(std::string_view name);
// Whether a YAML scalar text equals a Python default repr ('none', None, False, 5e-05, []...).
bool equals_python_default(const std::string& yaml_value, const std::string& default_repr);

}  // namespace lf::config
