// Gemma 3 text (Gemma3ForCausalLM, model_type gemma3_text: Gemma 3 1B, and the text tower's
// checkpoints): Llama's attention with per-head q/k norms, scores scaled by query_pre_attn_scalar^-0.5
// (not head_dim^-0.5), sliding-window layers (the last sliding_window tokens) interleaved with global
// ones (layer_types, or every sliding_window_pattern-th layer global), each kind with its own RoPE
// (the sliding layers' rope_local_base_freq, the global layers' rope_theta and rope_scaling); Gemma's
// RMSNorm x̂·(1 + w) before and after both attention and the MLP; a GELU-tanh gated MLP; embeddings
// scaled by sqrt(hidden_size). Gemma 2's logit soft-capping and bidirectional attention are refused.
#include <cmath>

#include "model_spec.h"

namespace lf::model {
namespace {

// transformers 5 nests each layer type's RoPE in rope_parameters; 4.x configs give the global
// layers' as rope_theta + rope_scaling and the sliding layers' theta as rope_local_base_freq.
void read_gemma3_rope(const nlohmann::json& j, ModelConfig& c, const std::string& source) {
  const auto* params = j.contains("rope_parameters") && j["rope_parameters"].is_object() ? &j["rope_parameters"] : nullptr;
  const auto entry = [&](const char* type) -> nlohmann::json {
    if (params && params->contains(type) && (*params)[type].is_object()) return (*params)[type];
    return nullptr;
  };
  if (auto full = entry("full_attention"); !full.is_null())
    c.rope = read_rope(j, full, c, json_or<double>(j, "rope_theta", 1e6), source + " full_attention");
  else if (!j.contains("rope_theta"))
    c.rope.theta = 1e6;  // Gemma3TextConfig's default global theta
  auto local = entry("sliding_attention");
  if (local.is_null()) local = nlohmann::json{{"rope_type", "default"}};
  c.local_rope = read_rope(j, local, c, json_or<double>(j, "rope_local_base_freq", 1e4), source + " sliding_attention");
}

void read_gemma3(const nlohmann::json& j, ModelConfig& c, const std::string& source) {
  c.qkv_bias = c.o_bias = json_or<bool>(j, "attention_bias", false);
  c.head_dim = json_or<int64_t>(j, "head_dim", 256);
  c.qk_norm = true;
  c.tie_word_embeddings = json_or<bool>(j, "tie_word_embeddings", true);
  const auto act = json_or<std::string>(j, "hidden_activation", json_or<std::string>(j, "hidden_act", "gelu_pytorch_tanh"));
  LF_CHECK(act == "gelu_pytorch_tanh", ConfigError,
           "{}: hidden_activation '{}' is not supported for Gemma 3 (gelu_pytorch_tanh only)", source, act);
  c.embedding_multiplier = std::sqrt(static_cast<double>(c.hidden_size));
  c.query_scale = 1.0 / std::sqrt(json_or<double>(j, "query_pre_attn_scalar", 256));
  for (const char* cap : {"attn_logit_softcapping", "final_logit_softcapping"})
    LF_CHECK(json_or<double>(j, cap, 0.0) == 0.0, ConfigError,
             "{}: {} is not supported (Gemma 2's soft-capping; lf-train's attention and head do not cap)", source, cap);
  LF_CHECK(!json_or<bool>(j, "use_bidirectional_attention", false), ConfigError,
           "{}: use_bidirectional_attention is not supported (a causal LM's attention is causal)", source);
  c.local_window = json_or<int64_t>(j, "sliding_window", 4096);
  LF_CHECK(c.local_window > 0, ConfigError, "{}: sliding_window must be positive, got {}", source, c.local_window);
  const auto types = json_or<std::vector<std::string>>(j, "layer_types", {});
  const int64_t pattern = json_or<int64_t>(j, "sliding_window_pattern", json_or<int64_t>(j, "_sliding_window_pattern", 6));
  LF_CHECK(types.empty() || static_cast<int64_t>(types.size()) == c.num_layers, ConfigError,
           "{}: layer_types lists {} layers, num_hidden_layers is {}", source, types.size(), c.num_layers);
  c.sliding_layers.clear();
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string t = types.empty() ? ((i + 1) % pattern != 0 ? "sliding_attention" : "full_attention")
                                        : types[static_cast<size_t>(i)];
    LF_CHECK(t == "sliding_attention" || t == "full_attention", ConfigError,
             "{}: layer_types[{}] is '{}' (sliding_attention or full_attention)", source, i, t);
    c.sliding_layers.push_back(t == "sliding_attention");
  }
  read_gemma3_rope(j, c, source);
}

LayerSpec gemma3_layer(const ModelConfig& c, int64_t index) {
  LayerSpec l = llama_layer(c, index);
  l.norm = NormKind::kRmsOnePlus;
  l.sandwich_norms = true;
  l.attention.scale = c.query_scale;
  if (c.sliding_layers.at(static_cast<size_t>(index))) {
    l.attention.kind = AttentionKind::kSlidingWindow;
    l.attention.window = c.local_window;
    l.attention.local_rope = true;
  }
  l.mlp.activation = MlpActivation::kGeluTanh;
  return l;
}

}  // namespace

const ModelSpec kGemma3Spec{"Gemma3ForCausalLM", "gemma3_text", read_gemma3, gemma3_layer};

}  // namespace lf::model
