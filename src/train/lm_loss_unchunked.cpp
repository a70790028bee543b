// transformers' ForCausalLMLoss op for op, the [B,T,V] logits whole: what pure_bf16 needs to round its
// gradients as LLaMA-Factory's run rounds them (lm_loss.h says why the chunked head cannot).
#include <ATen/ATen.h>

#include "lf/model/grad_sink.h"
#include "lf/model/loss.h"
#include "lf/train/lm_loss.h"

namespace lf::train {

at::Tensor lm_head_loss_sum_unchunked(const at::Tensor& normed_hidden, const at::Tensor& weight,
                                      const at::Tensor& labels) {
  const int64_t v = weight.size(0);
  // lm_head over every position of hidden [B,T,C] (HF's logits_to_keep 0), in the compute dtype: [B,T,V]
  const auto logits = at::linear(normed_hidden, model::cast_for_compute(weight, normed_hidden.scalar_type()));
  // labels padded with one -100 and shifted: position t predicts labels[t+1], the last predicts nothing. [B,T]
  const auto shifted = at::constant_pad_nd(labels, {0, 1}, model::kIgnoreIndex).narrow(1, 1, labels.size(1));
  // Upcast, then cross_entropy (log_softmax + nll_loss) summed: the caller's 1/N reaches the logits' fp32
  // gradient before its cast back to the compute dtype, as HF's loss / num_items_in_batch does.
  return at::cross_entropy_loss(logits.to(at::kFloat).view({-1, v}), shifted.contiguous().view({-1}), {},
                                at::Reduction::Sum, model::kIgnoreIndex);
}

}  // namespace lf::train
