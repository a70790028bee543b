#include "lf/train/lm_loss.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>

#include "lf/model/lm_head_loss.h"
#include "lf/model/loss.h"
#include "lf/model/host_copies.h"

namespace lf::train {

at::Tensor target_rows_of(const at::Tensor& cpu_labels) {
  const int64_t t = cpu_labels.size(1);
  return at::nonzero(cpu_labels.narrow(1, 1, t - 1).reshape({-1}) != model::kIgnoreIndex).squeeze(1);
}

namespace {

// hidden[:, :-1] as [B*(T-1), C] (the positions that predict) and labels[:, 1:] as [B*(T-1)].
at::Tensor predicting_rows(const at::Tensor& normed_hidden) {
  const int64_t b = normed_hidden.size(0), t = normed_hidden.size(1), c = normed_hidden.size(2);
  return normed_hidden.narrow(1, 0, t - 1).reshape({b * (t - 1), c});
}
at::Tensor shifted_labels(const at::Tensor& labels) { return labels.narrow(1, 1, labels.size(1) - 1).reshape({-1}); }
// <= 0: ~1 GiB of fp32 logits a chunk.
int64_t chunk_or_default(int64_t chunk_rows, const at::Tensor& weight) {
  return chunk_rows > 0 ? chunk_rows : std::max<int64_t>(1, (int64_t{1} << 30) / (4 * weight.size(0)));
}

}  // namespace

at::Tensor lm_head_loss_sum(const at::Tensor& normed_hidden, const at::Tensor& weight, const at::Tensor& labels,
                            int64_t chunk_rows, const at::Tensor& target_rows, model::GradSink* grad_sink) {
  auto h = predicting_rows(normed_hidden);
  auto y = shifted_labels(labels).to(h.device());
  auto rows = target_rows.defined() ? model::to_device(target_rows, h.device())
                                     : at::nonzero(y != model::kIgnoreIndex).squeeze(1);  // [M]
  if (rows.numel() == 0) return (normed_hidden.sum() * 0).to(at::kFloat);  // numel: known on the host
  auto hs = h.index_select(0, rows);  // [M, C]: only target positions reach lm_head
  auto ys = y.index_select(0, rows);
  return model::chunked_lm_head_ce_sum(hs, weight, ys, chunk_or_default(chunk_rows, weight), grad_sink);
}

at::Tensor lm_head_loss_sum_all_rows(const at::Tensor& normed_hidden, const at::Tensor& weight,
                                     const at::Tensor& labels, int64_t chunk_rows, model::GradSink* grad_sink) {
  return model::chunked_lm_head_ce_sum_masked(predicting_rows(normed_hidden), weight, shifted_labels(labels),
                                              chunk_or_default(chunk_rows, weight), grad_sink);  // -100 kept
}

}  // namespace lf::train
