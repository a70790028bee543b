#include "lf/model/fused_loss.h"

#include <ATen/ATen.h>

#include "lf/common/error.h"
#include "lf/model/lm_head_loss.h"
#include "lf/model/loss.h"

namespace lf::model {

at::Tensor fused_linear_cross_entropy_sum(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels,
                                          int64_t chunk_tokens) {
  LF_CHECK(hidden.dim() == 2 && labels.dim() == 1 && hidden.size(0) == labels.size(0), ConfigError,
           "fused CE: hidden [N,C] and labels [N] expected");
  LF_CHECK(chunk_tokens > 0, ConfigError, "fused CE: chunk_tokens must be positive");
  const auto y = labels.to(hidden.device(), at::kLong);
  const auto rows = at::nonzero(y != kIgnoreIndex).squeeze(1);  // only target rows reach the head
  if (rows.numel() == 0) return (hidden.sum() * 0).to(at::kFloat);
  return chunked_lm_head_ce_sum(hidden.index_select(0, rows), weight, y.index_select(0, rows), chunk_tokens);
}

at::Tensor causal_lm_loss_fused(const CausalLM& model, const at::Tensor& hidden, const at::Tensor& labels,
                                bool sum_reduction, int64_t chunk_tokens) {
  const int64_t t = hidden.size(1), c = hidden.size(2);
  auto x = model.final_norm(hidden).narrow(1, 0, t - 1).reshape({-1, c});  // [B*(T-1), C]
  auto y = labels.narrow(1, 1, t - 1).reshape({-1}).to(hidden.device());
  auto sum = fused_linear_cross_entropy_sum(x, model.lm_head_weight(), y, chunk_tokens);
  if (sum_reduction) return sum;
  return sum / y.ne(kIgnoreIndex).sum().clamp_min(1).to(at::kFloat);
}

}  // namespace lf::model
