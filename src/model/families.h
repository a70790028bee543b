#pragma once
// The model families lf-train runs, each reading its own config.json keys into ModelConfig: Llama
// and Qwen2 (families.cpp), Qwen3 (family_qwen3.cpp), Mistral (family_mistral.cpp). A new family is
// an entry of kFamilies plus a file of its own. Internal to lf_model / lf_safetensors. Torch-free.
#include <nlohmann/json.hpp>

#include <string>

#include "lf/common/error.h"
#include "lf/model/config.h"

namespace lf::model {

struct ModelFamily {
  const char* architecture;  // "Qwen3ForCausalLM"
  const char* model_type;    // "qwen3"
  Architecture arch;
  // The family's keys (the shared sizes, rope and activation are read already). ConfigError for
  // anything that would change the function computed and is not implemented.
  void (*read)(const nlohmann::json& j, ModelConfig& c, const std::string& source);
};

// By `architectures[0]`, else by model_type; nullptr when unknown.
const ModelFamily* find_model_family(const std::string& architecture, const std::string& model_type);
// "LlamaForCausalLM, Qwen2ForCausalLM, ..." for messages.
std::string supported_architectures();

void read_qwen3(const nlohmann::json& j, ModelConfig& c, const std::string& source);
void read_mistral(const nlohmann::json& j, ModelConfig& c, const std::string& source);

template <typename T>
T json_or(const nlohmann::json& j, const char* key, T fallback) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? fallback : it->get<T>();
}

// transformers 5 writes layer_types; a sliding-window layer changes attention.
inline void refuse_sliding_layers(const nlohmann::json& j, const std::string& source) {
  LF_CHECK(!json_or<bool>(j, "use_sliding_window", false), ConfigError,
           "{}: use_sliding_window=true is not supported (lf-train's attention is full causal)", source);
  if (j.contains("layer_types") && j["layer_types"].is_array())
    for (const auto& t : j["layer_types"])
      LF_CHECK(!t.is_string() || t.get<std::string>() == "full_attention", ConfigError,
               "{}: layer_types holds '{}'; lf-train supports full_attention layers only", source, t.dump());
}

}  // namespace lf::model
