// Qwen3 dense (Qwen3ForCausalLM): Qwen2's layer without the q/k/v biases (attention_bias, default
// false), with an RMSNorm over head_dim on every query and key head before RoPE (q_norm, k_norm:
// QkNorm in layers.h), and head_dim from the config (transformers' default 128, not hidden / heads).
#include "model_spec.h"

namespace lf::model {
namespace {

void read_qwen3(const nlohmann::json& j, ModelConfig& c, const std::string& source) {
  c.qkv_bias = c.o_bias = json_or<bool>(j, "attention_bias", false);
  c.head_dim = json_or<int64_t>(j, "head_dim", 128);
  c.qk_norm = true;
  refuse_sliding_layers(j, source);
}

}  // namespace

const ModelSpec kQwen3Spec{"Qwen3ForCausalLM", "qwen3", read_qwen3, llama_layer};

}  // namespace lf::model
