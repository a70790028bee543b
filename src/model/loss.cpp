#include "lf/model/loss.h"

#include <ATen/ATen.h>

namespace lf::model {

at::Tensor causal_lm_loss(const at::Tensor& logits, const at::Tensor& labels, bool sum_reduction) {
  const int64_t t = logits.size(1), v = logits.size(2);
  auto x = logits.narrow(1, 0, t - 1).reshape({-1, v}).to(at::kFloat);  // [B*(T-1), V]
  auto y = labels.narrow(1, 1, t - 1).reshape({-1}).to(x.device());     // [B*(T-1)]
  return at::cross_entropy_loss(x, y, {}, sum_reduction ? at::Reduction::Sum : at::Reduction::Mean, kIgnoreIndex);
}

}  // namespace lf::model
