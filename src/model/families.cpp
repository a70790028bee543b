#include "families.h"

namespace lf::model {
namespace {

void read_llama(const nlohmann::json& j, ModelConfig& c, const std::string&) {
  c.qkv_bias = c.o_bias = json_or<bool>(j, "attention_bias", false);
  c.mlp_bias = json_or<bool>(j, "mlp_bias", false);
}

void read_qwen2(const nlohmann::json& j, ModelConfig& c, const std::string& source) {
  c.qkv_bias = true;
  refuse_sliding_layers(j, source);
}

const ModelFamily kFamilies[] = {
    {"LlamaForCausalLM", "llama", Architecture::kLlama, read_llama},
    {"Qwen2ForCausalLM", "qwen2", Architecture::kQwen2, read_qwen2},
    {"Qwen3ForCausalLM", "qwen3", Architecture::kQwen3, read_qwen3},
    {"MistralForCausalLM", "mistral", Architecture::kMistral, read_mistral},
};

}  // namespace

const ModelFamily* find_model_family(const std::string& architecture, const std::string& model_type) {
  for (const auto& f : kFamilies)
    if (architecture == f.architecture || (architecture.empty() && model_type == f.model_type)) return &f;
  return nullptr;
}

std::string supported_architectures() {
  std::string s;
  for (const auto& f : kFamilies) s += (s.empty() ? "" : ", ") + std::string(f.architecture);
  return s;
}

}  // namespace lf::model
