#pragma once
// Causal-LM cross-entropy as transformers computes it: logits[:, :-1] predict
// labels[:, 1:], label -100 ignored, logits upcast to fp32.
#include <ATen/core/Tensor.h>

namespace lf::model {

constexpr int64_t kIgnoreIndex = -100;

// logits [B,T,V], labels [B,T]. Mean over non-ignored targets, or their sum
// (sum_reduction) for DESIGN's "sum over the optimizer step / target-token count".
at::Tensor causal_lm_loss(const at::Tensor& logits, const at::Tensor& labels, bool sum_reduction = false);

}  // namespace lf::model
