// The mixture-of-experts keys of config.json the MoE families share (Qwen3-MoE, Qwen2-MoE, Mixtral),
// and the sparse decoder layer they compose: Llama's attention, and as MLP a router over experts.
#include <algorithm>

#include "model_spec.h"

namespace lf::model {

void read_moe_keys(const nlohmann::json& j, ModelConfig& c, const std::string& source, const char* intermediate_key,
                   const MoeConfig& defaults) {
  auto& m = c.moe;
  // transformers 5 saves num_local_experts for every MoE family (num_experts is its alias).
  m.num_experts = json_or<int64_t>(j, "num_experts", json_or<int64_t>(j, "num_local_experts", defaults.num_experts));
  m.top_k = json_or<int64_t>(j, "num_experts_per_tok", defaults.top_k);
  m.intermediate_size = json_or<int64_t>(j, intermediate_key, defaults.intermediate_size);
  m.norm_topk_prob = json_or<bool>(j, "norm_topk_prob", false);
  m.decoder_sparse_step = json_or<int64_t>(j, "decoder_sparse_step", 1);
  m.mlp_only_layers = json_or<std::vector<int64_t>>(j, "mlp_only_layers", {});
  m.output_router_logits = json_or<bool>(j, "output_router_logits", false);
  m.router_aux_loss_coef = json_or<double>(j, "router_aux_loss_coef", 0.001);
  LF_CHECK(m.num_experts > 0 && m.top_k > 0 && m.top_k <= m.num_experts, ConfigError,
           "{}: num_experts_per_tok {} must be in [1, num_experts {}]", source, m.top_k, m.num_experts);
  LF_CHECK(m.intermediate_size > 0, ConfigError, "{}: {} must be positive, got {}", source, intermediate_key,
           m.intermediate_size);
  LF_CHECK(m.decoder_sparse_step > 0, ConfigError, "{}: decoder_sparse_step must be positive, got {}", source,
           m.decoder_sparse_step);
  // Routing variants transformers has in other families, never silently dropped here.
  for (const char* key : {"router_jitter_noise", "capacity_factor", "expert_capacity"}) {
    const double v = json_or<double>(j, key, 0.0);
    LF_CHECK(v == 0, ConfigError,
             "{}: {} = {} is not supported (lf-train routes every token to its top-k experts, without noise "
             "or a capacity limit, as transformers does for this family)",
             source, key, v);
  }
}

bool is_sparse_layer(const ModelConfig& c, int64_t index) {
  const auto& m = c.moe;
  const bool dense = std::find(m.mlp_only_layers.begin(), m.mlp_only_layers.end(), index) != m.mlp_only_layers.end();
  return !dense && m.num_experts > 0 && (index + 1) % m.decoder_sparse_step == 0;
}

int64_t sparse_layers_before(const ModelConfig& c, int64_t index) {
  int64_t n = 0;
  for (int64_t i = 0; i < index; ++i) n += is_sparse_layer(c, i);
  return n;
}

LayerSpec moe_layer(const ModelConfig& c, int64_t index, const ExpertNames& names) {
  LayerSpec l = llama_layer(c, index);
  if (!is_sparse_layer(c, index)) return l;
  l.mlp.kind = MlpKind::kMoe;
  l.mlp.intermediate = 0;
  auto& moe = l.mlp.moe;
  moe.experts = c.moe.num_experts;
  moe.top_k = c.moe.top_k;
  moe.expert_intermediate = c.moe.intermediate_size;
  moe.norm_topk_prob = c.moe.norm_topk_prob;
  moe.index = sparse_layers_before(c, index);
  moe.names = names;
  return l;
}

}  // namespace lf::model
