// Qwen3-MoE (Qwen3MoeForCausalLM, Qwen3-30B-A3B / 235B-A22B): Qwen3's attention (per-head q/k RMSNorm,
// head_dim from the config, no biases) and, in its sparse layers, a router over experts: top-k of
// softmax(gate(x)), renormalised when norm_topk_prob, each expert a SwiGLU of moe_intermediate_size.
// Layers in mlp_only_layers (or off the decoder_sparse_step grid) keep a dense SwiGLU of
// intermediate_size. Sliding-window variants refused.
#include "model_spec.h"

namespace lf::model {
namespace {

void read_qwen3_moe(const nlohmann::json& j, ModelConfig& c, const std::string& source) {
  c.qkv_bias = c.o_bias = json_or<bool>(j, "attention_bias", false);
  c.qk_norm = true;  // head_dim: the config's, else hidden / heads (Qwen3MoeAttention's getattr)
  refuse_sliding_layers(j, source);
  read_moe_keys(j, c, source, "moe_intermediate_size", moe_defaults(128, 8, 768));
}

LayerSpec qwen3_moe_layer(const ModelConfig& c, int64_t index) { return moe_layer(c, index, ExpertNames{}); }

}  // namespace

const ModelSpec kQwen3MoeSpec{"Qwen3MoeForCausalLM", "qwen3_moe", read_qwen3_moe, qwen3_moe_layer};

}  // namespace lf::model
