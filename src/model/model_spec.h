#pragma once
// A model family (torchtitan's ModelSpec): how its config.json is read and how each decoder
// layer is composed. model_layout.cpp derives the rest from these two (parameters with their
// names, shapes, ZeRO units and HF tensors; LoRA's linear modules; counts and FLOPs), and
// layer_builder.cpp builds the layer's modules. Internal to lf_safetensors / lf_model. Torch-free.
//
// A new family is a file defining its spec (family_qwen3.cpp is the shortest) plus its name in
// kFamilies (model_spec.cpp). A new kind of norm, attention or MLP (model_layout.h) is declared
// once in model_layout.cpp (its tensors) and once in layer_builder.cpp (its module).
#include <nlohmann/json.hpp>

#include <string>

#include "lf/common/error.h"
#include "lf/model/config.h"
#include "lf/model/model_layout.h"

namespace lf::model {

struct ModelSpec {
  const char* architecture;  // config.json's architectures[0]: "Qwen3ForCausalLM"
  const char* model_type;    // "qwen3" (matched when architectures is absent)
  // The family's own keys into `c` (the shared sizes, rope and activation are read already).
  // ConfigError for anything that would change the function computed and is not implemented.
  void (*read_config)(const nlohmann::json& j, ModelConfig& c, const std::string& source);
  // Decoder layer `index`'s composition: its norms, attention and MLP.
  LayerSpec (*layer)(const ModelConfig& c, int64_t index);
};

// The families, one file each (model_spec.cpp registers them).
extern const ModelSpec kLlamaSpec, kQwen2Spec, kQwen3Spec, kMistralSpec, kQwen3MoeSpec, kQwen2MoeSpec, kMixtralSpec,
    kGemma3Spec;

// By `architectures[0]`, else by model_type; nullptr when unknown.
const ModelSpec* find_model_spec(const std::string& architecture, const std::string& model_type);
// Why lf-train does not train a family it knows of (DeepSeek's MLA, Qwen3-Next's linear attention,
// ...), or "" when it is not one of those.
std::string refused_architecture_reason(const std::string& architecture, const std::string& model_type);
// "LlamaForCausalLM, Qwen2ForCausalLM, ..." for messages.
std::string supported_architectures();
// The spec parse_model_config found for `c`.
const ModelSpec& model_spec(const ModelConfig& c);

// Llama's decoder layer with the config's biases and q/k norms (family_llama.cpp): Qwen2, Qwen3
// and Mistral compose theirs the same way.
LayerSpec llama_layer(const ModelConfig& c, int64_t index);

// A family's defaults for the MoE keys its config.json may leave out (the rest of MoeConfig's own).
inline MoeConfig moe_defaults(int64_t experts, int64_t top_k, int64_t intermediate) {
  MoeConfig d;
  d.num_experts = experts;
  d.top_k = top_k;
  d.intermediate_size = intermediate;
  return d;
}

// The mixture-of-experts keys the MoE families share (moe_spec.cpp): num_experts (or transformers 5's
// num_local_experts), num_experts_per_tok, norm_topk_prob, decoder_sparse_step, mlp_only_layers,
// output_router_logits, router_aux_loss_coef; the expert size from `intermediate_key`. A key the file
// lacks takes the family's transformers default (`defaults`: num_experts, top_k, intermediate_size).
void read_moe_keys(const nlohmann::json& j, ModelConfig& c, const std::string& source, const char* intermediate_key,
                   const MoeConfig& defaults);
// Whether layer `index` routes over experts (transformers' Qwen2/3-MoE rule: not in mlp_only_layers,
// and (index + 1) % decoder_sparse_step == 0), and its place among the sparse layers.
bool is_sparse_layer(const ModelConfig& c, int64_t index);
int64_t sparse_layers_before(const ModelConfig& c, int64_t index);
// llama_layer with its MLP a router over the config's experts when the layer is sparse.
LayerSpec moe_layer(const ModelConfig& c, int64_t index, const ExpertNames& names);

template <typename T>
T json_or(const nlohmann::json& j, const char* key, T fallback) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? fallback : it->get<T>();
}

// RoPE from `params` (rope_parameters / rope_scaling, or one layer type's entry of them) with the
// config's `j` for keys transformers reads at the top level: type, theta (default_theta when absent),
// and each type's own keys. ConfigError for a type lf-train does not implement (config.cpp).
RopeConfig read_rope(const nlohmann::json& j, const nlohmann::json& params, const ModelConfig& c, double default_theta,
                     const std::string& source);

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
