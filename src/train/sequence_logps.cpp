#include "sequence_logps.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <optional>

#include "lf/model/causal_lm.h"
#include "lf/model/key_padding.h"
#include "lf/model/layers.h"
#include "lf/model/lm_head_logps.h"
#include "lf/model/loss.h"
#include "lf/parallel/strategy.h"
#include "lf/model/host_copies.h"
#include "padding_free.h"

namespace lf::train {

std::vector<int64_t> pair_rows(const std::vector<int64_t>& examples, bool second) {
  std::vector<int64_t> rows;
  rows.reserve(examples.size());
  for (auto e : examples) rows.push_back(2 * e + (second ? 1 : 0));
  return rows;
}

std::vector<int64_t> both_rows(const std::vector<int64_t>& examples) {
  auto rows = pair_rows(examples, false);
  const auto second = pair_rows(examples, true);
  rows.insert(rows.end(), second.begin(), second.end());
  return rows;
}

void disable_dropout(model::CausalLM& model) {
  for (auto& ml : model.linears())
    if (ml.linear->lora_) ml.linear->lora_->dropout_ = 0;
}

at::Tensor ld_weights(const at::Tensor& labels, double alpha) {
  const int64_t n = labels.size(0), t = labels.size(1), k = n / 2;
  const auto mask = labels.narrow(1, 1, t - 1) != model::kIgnoreIndex;  // [N,T-1]
  const auto valid = mask.sum(1);                                        // [N]
  const auto shorter = at::minimum(valid.narrow(0, 0, k), valid.narrow(0, k, k));
  const auto start = at::argmax(mask.to(at::kInt), 1);                   // each row's first target
  const auto public_len = start + at::cat({shorter, shorter});           // [N]
  const auto pos = at::arange(t - 1, labels.options().dtype(at::kLong)).unsqueeze(0).expand({n, t - 1});
  const auto w = at::where(pos < public_len.unsqueeze(1), at::ones({}, at::kFloat), at::full({}, alpha, at::kFloat));
  return w.masked_select(mask);  // [M], the order of at::nonzero(mask.reshape(-1))
}

namespace {

// Each row's logits summed over its positions and the vocabulary, from sum_v logits[t, v] = h_t . sum_v W_v
// (sequence_logps.h): normed [N, T, C] padded, or [1, L, C] padding-free (row r: p's offsets[r], lengths[r]).
at::Tensor logits_sums(const at::Tensor& normed, const at::Tensor& w, const PackedRows* p) {
  c10::NoGradGuard no_grad;
  const auto w_sum = at::sum(w, {0}, false, at::kFloat).to(at::kDouble);  // [C]
  if (!p) return at::matmul(at::sum(normed, {1}, false, at::kFloat).to(at::kDouble), w_sum);  // [N]
  std::vector<at::Tensor> rows;  // a sum a row, in order (index_add's atomics would not be deterministic)
  for (size_t r = 0; r < p->lengths.size(); ++r)
    rows.push_back(at::sum(normed[0].narrow(0, p->offsets[r], p->lengths[r]), {0}, false, at::kFloat));
  return at::matmul(at::stack(rows).to(at::kDouble), w_sum);
}

}  // namespace

SequenceLogps sequence_logps(const ObjectiveContext& ctx, const Batch& b, const LogpsOptions& options) {
  auto& m = options.model ? *options.model : *ctx.model;
  auto* hooks = options.model ? nullptr : ctx.strategy->unit_hooks();
  const auto device = m.lm_head_weight().device();
  const int64_t n = b.input_ids.size(0), t = b.input_ids.size(1);
  // Host: each target position's flat index b*(T-1)+j and its token.
  const auto shifted = b.labels.narrow(1, 1, t - 1);  // [N,T-1]
  const auto mask = shifted != model::kIgnoreIndex;
  const auto flat = at::nonzero(mask.reshape({-1})).squeeze(1);  // [M]
  const auto targets = shifted.reshape({-1}).index_select(0, flat);
  std::optional<PackedRows> packed;
  if (preference_padding_free(m, b)) packed = pack_rows(b);
  SequenceLogps out;
  out.positions = packed ? packed->lengths : std::vector<int64_t>(static_cast<size_t>(n), t);
  out.valid = model::to_device(mask.sum(1).to(at::kFloat), device);
  const auto flat_d = model::to_device(flat, device), targets_d = model::to_device(targets, device);
  // The target positions among the forward's rows: the padded [N, T-1] layout's, or the packed row's.
  const auto at_d = packed ? model::to_device(packed_positions(*packed, flat, t), device) : flat_d;
  std::optional<model::KeyPaddingScope> pads;  // only on padded rows: the mask costs the flash kernel
  if (!packed && b.attention_mask.defined() && b.num_tokens < n * t && model::pad_masked_logits(device))
    pads.emplace(model::to_device(b.attention_mask.sum(1).clamp_min(1), device));  // an all-pad row keeps one key (no NaN)
  const auto x = packed ? m.hidden_states(model::to_device(packed->input_ids, device),
                                          model::to_device(packed->position_ids, device), hooks, packed->segment_ids)
                        : m.hidden_states(model::to_device(b.input_ids, device), {}, hooks);  // [N,T,C] / [1,L,C]
  out.logps = model::run_unit(hooks, m.head_unit(), x, [&](const at::Tensor& h) {
    const auto normed = m.final_norm(h);
    const auto& w = m.lm_head_weight();  // [V,C]
    out.vocab = w.size(0);
    out.logits_sum = logits_sums(normed, w, packed ? &*packed : nullptr);
    const int64_t c = normed.size(2);
    const auto all = packed ? normed.reshape({-1, c}) : normed.narrow(1, 0, t - 1).reshape({n * (t - 1), c});
    const auto rows = all.index_select(0, at_d);
    const int64_t chunk = ctx.chunk_rows > 0 ? ctx.chunk_rows : std::max<int64_t>(1, (int64_t{1} << 30) / (4 * w.size(0)));
    auto row_logps = model::chunked_lm_head_logps(rows, w, targets_d, chunk, m.lm_head_grad_sink());
    if (options.ld_alpha) row_logps = row_logps * model::to_device(ld_weights(b.labels, *options.ld_alpha), device);
    // Summed per row as get_batch_logps sums (masked [N, T-1] summed over T): the same rounding.
    return at::zeros({n * (t - 1)}, row_logps.options()).index_put({flat_d}, row_logps).view({n, t - 1}).sum(-1);
  });
  return out;
}

}  // namespace lf::train
