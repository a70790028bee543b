#pragma once
// A decoder-only model's shape, read from a Hugging Face config.json. Torch-free.
//
// Understood (src/model/model_spec.cpp, a file per family): LlamaForCausalLM /
// model_type "llama", Qwen2ForCausalLM / "qwen2", Qwen3ForCausalLM / "qwen3" (per-head q/k
// RMSNorm) and MistralForCausalLM / "mistral" (sliding window kept, checked by the trainer);
// rope as transformers 4 writes it (rope_theta + rope_scaling) and as transformers 5
// does (rope_parameters); rope_type "default" and "llama3". Anything that would change
// the function computed (other rope types, sliding-window attention, other
// activations) is a ConfigError, never silently ignored.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace lf::model {

struct ModelSpec;  // the family (src/model/model_spec.h); its layout: model_layout.h

// RoPE as transformers' ROPE_INIT_FUNCTIONS compute it (rope_inv_freq, causal_lm.h).
struct RopeConfig {
  double theta = 10000.0;
  std::string type = "default";  // "default" | "linear" | "dynamic" | "yarn" | "llama3"
  double factor = 1.0;           // linear, dynamic, yarn, llama3
  // llama3:
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;  // llama3, yarn
  // yarn: cos and sin scaled by attention_factor (from factor, mscale, mscale_all_dim when not given);
  // the ramp between beta_fast and beta_slow rotations, its bounds rounded outwards when truncate.
  double attention_factor = 1.0;
  double beta_fast = 32, beta_slow = 1;
  bool truncate = true;
};

// Mixture of experts (Qwen3-MoE, Qwen2-MoE, Mixtral; family_*.cpp read it). num_experts 0: dense.
struct MoeConfig {
  int64_t num_experts = 0;
  int64_t top_k = 0;                  // num_experts_per_tok
  int64_t intermediate_size = 0;      // each expert's (moe_intermediate_size; Mixtral: intermediate_size)
  bool norm_topk_prob = false;
  int64_t shared_expert_intermediate_size = 0;  // Qwen2-MoE
  int64_t decoder_sparse_step = 1;    // layer i is sparse when (i + 1) % step == 0 ...
  std::vector<int64_t> mlp_only_layers;  // ... and i is not listed here (those keep a dense MLP)
  // transformers adds router_aux_loss_coef x the load-balancing loss to the training loss when the
  // config says output_router_logits (LLaMA-Factory's moe_aux_loss_coef sets both).
  bool output_router_logits = false;
  double router_aux_loss_coef = 0.001;
};

struct ModelConfig {
  const ModelSpec* spec = nullptr;  // set by parse_model_config
  std::string architecture_name;  // "LlamaForCausalLM" | "Qwen2ForCausalLM" | ...
  std::string model_type;         // "llama" | "qwen2" | "qwen3" | "mistral"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double initializer_range = 0.02;
  bool tie_word_embeddings = false;
  // Read by the family's spec, which composes its layers from them (model_layout.h's LayerSpec).
  bool qkv_bias = false;  // Qwen2: always; Llama: attention_bias
  bool o_bias = false;    // Llama: attention_bias
  bool mlp_bias = false;  // Llama: mlp_bias
  bool qk_norm = false;   // Qwen3: RMSNorm over head_dim of every query and key head before RoPE
  // Mistral: attention sees the last sliding_window tokens only; lf-train's attention is full
  // causal, so it trains only rows no longer than the window (the trainer refuses a longer cutoff_len).
  int64_t sliding_window = 0;  // 0: none
  MoeConfig moe;
  // Gemma 3 (family_gemma3.cpp): its sliding-window layers and their own RoPE, GELU-tanh gates,
  // embeddings scaled by sqrt(hidden_size), queries scaled by query_pre_attn_scalar^-0.5.
  double embedding_multiplier = 1.0;
  double query_scale = 0;               // the attention scores' scale; 0: 1 / sqrt(head_dim)
  int64_t local_window = 0;             // a sliding layer's queries see the last local_window tokens
  std::vector<bool> sliding_layers;     // per layer (empty: none)
  std::optional<RopeConfig> local_rope; // the sliding layers' RoPE
  RopeConfig rope;
  std::string torch_dtype = "float32";  // as written in the file ("dtype" in transformers 5)
  std::string raw_json;                 // the file as read, rewritten on save
};

// `source` names the file in errors.
ModelConfig parse_model_config(const std::string& json_text, const std::string& source);
ModelConfig load_model_config(const std::filesystem::path& config_json);

// config.json text for saving: raw_json with "architectures" set and torch_dtype/dtype
// set to `dtype_name` ("bfloat16", "float32", ...).
std::string model_config_json_for_save(const ModelConfig& config, const std::string& dtype_name);

// Every parameter of its layout (model_layout.h), a tied lm_head once.
int64_t num_parameters(const ModelConfig& config);

}  // namespace lf::model
