#pragma once
// The model FLOPs of a training step, for MFU: PaLM's count, as shared/bench's peers count.
// Torch-free.
#include <cstdint>

namespace lf::model {
class CausalLM;
}

namespace lf::train {

struct ModelFlops {
  // Per token: 2N forward + 2N input-gradient backward + 2 x trainable weight-gradient (6N for
  // full fine-tuning, ~4N for LoRA, between for freeze), N = every parameter the forward uses.
  double dense_per_token = 0;
  // 12·L·H FLOPs per token per position it attends over (S = the row length; no causal discount;
  // the layout's attention_flops_per_token_position).
  double attention_per_token_position = 0;
};

// trainable_params: those a token's weight gradients cover (a mixture of experts: each expert's k / E).
ModelFlops model_flops(model::CausalLM& m, double trainable_params);


// A step's model FLOPs from its padded tokens (Σ B·T) and Σ B·T² over its micro-batches.
inline double step_model_flops(const ModelFlops& f, double padded_tokens, double padded_token_positions) {
  return f.dense_per_token * padded_tokens + f.attention_per_token_position * padded_token_positions;
}

}  // namespace lf::train
