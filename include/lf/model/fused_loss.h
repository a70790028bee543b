#pragma once
// The LM head and cross-entropy fused in chunks of tokens (Liger-style "fused linear
// cross-entropy") for callers holding [N,C] hidden states and -100-padded labels: only the
// target rows go through lm_head_loss.h's chunked head + CE (the trainer's loss too), whose
// gradients are computed in the forward itself, so nothing vocab-sized is kept for backward.
#include <ATen/core/Tensor.h>

#include "lf/model/causal_lm.h"

namespace lf::model {

// hidden [N,C] (compute dtype), weight [V,C], labels [N] (-100 ignored).
// Returns the fp32 sum of token cross-entropies. The weight gradient is computed only
// when weight requires grad (not for a frozen head under LoRA), accumulated in fp32.
// Finding the target rows syncs the device once.
at::Tensor fused_linear_cross_entropy_sum(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels,
                                          int64_t chunk_tokens = 8192);

// The model's causal-LM loss from the last decoder layer's output [B,T,C]: final norm,
// shift, fused head + CE. Mean over non-ignored targets, or their sum.
at::Tensor causal_lm_loss_fused(const CausalLM& model, const at::Tensor& hidden, const at::Tensor& labels,
                                bool sum_reduction = false, int64_t chunk_tokens = 8192);

}  // namespace lf::model
