// Qwen2-MoE (Qwen2MoeForCausalLM, Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B): Qwen2's attention (q/k/v biases
// from qkv_bias, default true) and, in its sparse layers, routed experts (Qwen3-MoE's router, no
// renormalisation unless norm_topk_prob) plus a shared expert every token passes, scaled by
// sigmoid(shared_expert_gate(x)). Sliding-window variants refused.
#include "model_spec.h"

namespace lf::model {
namespace {

void read_qwen2_moe(const nlohmann::json& j, ModelConfig& c, const std::string& source) {
  c.qkv_bias = json_or<bool>(j, "qkv_bias", true);
  refuse_sliding_layers(j, source);
  read_moe_keys(j, c, source, "moe_intermediate_size", moe_defaults(60, 4, 1408));
  c.moe.shared_expert_intermediate_size = json_or<int64_t>(j, "shared_expert_intermediate_size", 5632);
  LF_CHECK(c.moe.shared_expert_intermediate_size > 0, ConfigError,
           "{}: shared_expert_intermediate_size must be positive, got {}", source,
           c.moe.shared_expert_intermediate_size);
}

LayerSpec qwen2_moe_layer(const ModelConfig& c, int64_t index) {
  auto l = moe_layer(c, index, ExpertNames{});
  if (l.mlp.kind == MlpKind::kMoe) {
    l.mlp.moe.shared_intermediate = c.moe.shared_expert_intermediate_size;
    l.mlp.moe.shared_gate = true;
  }
  return l;
}

}  // namespace

const ModelSpec kQwen2MoeSpec{"Qwen2MoeForCausalLM", "qwen2_moe", read_qwen2_moe, qwen2_moe_layer};

}  // namespace lf::model
