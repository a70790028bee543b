// Mixtral (MixtralForCausalLM, Mixtral-8x7B / 8x22B): Mistral's attention and, in every layer, a
// router over num_local_experts experts (top num_experts_per_tok, always renormalised), each a
// SwiGLU of intermediate_size. Its checkpoints name the block block_sparse_moe and an expert's
// projections w1 (gate), w3 (up), w2 (down). The sliding window is kept as Mistral's (the trainer
// refuses rows longer than it); router_jitter_noise > 0 is refused.
#include "model_spec.h"

namespace lf::model {
namespace {

void read_mixtral(const nlohmann::json& j, ModelConfig& c, const std::string& source) {
  const int64_t window = json_or<int64_t>(j, "sliding_window", 0);
  LF_CHECK(window >= 0, ConfigError, "{}: sliding_window {} is negative", source, window);
  c.sliding_window = window;
  read_moe_keys(j, c, source, "intermediate_size", moe_defaults(8, 2, 14336));
  c.moe.norm_topk_prob = true;  // MixtralTopKRouter always divides by the chosen probabilities' sum
  c.moe.decoder_sparse_step = 1;
  c.moe.mlp_only_layers.clear();
}

LayerSpec mixtral_layer(const ModelConfig& c, int64_t index) {
  return moe_layer(c, index, ExpertNames{"block_sparse_moe", "w1", "w3", "w2"});
}

}  // namespace

const ModelSpec kMixtralSpec{"MixtralForCausalLM", "mixtral", read_mixtral, mixtral_layer};

}  // namespace lf::model
