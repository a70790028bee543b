// Llama (LlamaForCausalLM): pre-norm RMSNorm layers, grouped-query attention with RoPE, a SwiGLU
// MLP; q/k/v/o biases from attention_bias, the MLP's from mlp_bias. Its layer is the one the
// other families here compose theirs from (llama_layer).
#include "model_spec.h"

namespace lf::model {
namespace {

void read_llama(const nlohmann::json& j, ModelConfig& c, const std::string&) {
  c.qkv_bias = c.o_bias = json_or<bool>(j, "attention_bias", false);
  c.mlp_bias = json_or<bool>(j, "mlp_bias", false);
}

}  // namespace

LayerSpec llama_layer(const ModelConfig& c, int64_t) {
  LayerSpec l;
  l.norm = NormKind::kRms;
  l.norm_eps = c.rms_norm_eps;
  l.attention = {AttentionKind::kFullCausal, c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim,
                 c.qkv_bias, c.o_bias, c.qk_norm};
  l.mlp.kind = MlpKind::kSwiGlu;
  l.mlp.hidden = c.hidden_size;
  l.mlp.intermediate = c.intermediate_size;
  l.mlp.bias = c.mlp_bias;
  return l;
}

const ModelSpec kLlamaSpec{"LlamaForCausalLM", "llama", read_llama, llama_layer};

}  // namespace lf::model
