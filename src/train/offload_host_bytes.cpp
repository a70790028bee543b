#include "offload_host_bytes.h"

namespace lf::train {

OffloadHostBytes predict_offload_host_bytes(const config::TrainConfig& c, const model::ModelConfig& mc,
                                            int64_t world_size) {
  OffloadHostBytes b;
  b.trainable = static_cast<double>(model::num_parameters(mc));
  if (c.finetuning_type == "lora")  // an upper bound: A and B on all seven projections of every layer
    b.trainable = static_cast<double>(c.lora_rank * mc.num_layers) *
                  static_cast<double>(4 * mc.hidden_size + 2 * mc.num_heads * mc.head_dim +
                                      4 * mc.num_kv_heads * mc.head_dim + 3 * (mc.hidden_size + mc.intermediate_size));
  b.per_rank = 16.0 * b.trainable * c.offload_ratio / static_cast<double>(world_size);
  return b;
}

}  // namespace lf::train
