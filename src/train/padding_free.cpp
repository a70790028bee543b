#include "padding_free.h"

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include <mutex>

#include "lf/common/error.h"
#include "lf/model/causal_lm.h"
#include "lf/model/kernel_paths.h"
#include "lf/model/key_padding.h"
#include "lf/model/varlen_attention.h"

namespace lf::train {

bool preference_padding_free(const model::CausalLM& m, const Batch& b) {
  const int64_t n = b.input_ids.size(0), t = b.input_ids.size(1);
  // No padding: nothing to drop. No token at all (ZeRO-3's no_target_batch): the padded row keeps the forward.
  if (!b.attention_mask.defined() || b.num_tokens >= n * t || b.num_tokens == 0 || b.segment_ids.defined())
    return false;
  const std::string& mode = model::kernel_paths().pref_padding_free;
  if (mode == "0") return false;
  const auto device = m.lm_head_weight().device();
  const bool on = mode == "1" || (!model::pad_masked_logits(device) &&
                                  model::varlen_attention_supported(device, m.compute_dtype(), m.config().head_dim));
  static std::once_flag logged;
  if (on)
    std::call_once(logged, [&] {
      spdlog::info("preference rows: padding-free (a micro-batch's rows end to end, attention within each: {}; "
                   "logits/* average the real positions; LF_PREF_PADDING_FREE=0 pads them)",
                   device.is_cuda() ? "flash's varlen kernel" : "a block-diagonal mask");
    });
  return on;
}

PackedRows pack_rows(const Batch& b) {
  const int64_t n = b.input_ids.size(0), t = b.input_ids.size(1);
  const auto mask = b.attention_mask.contiguous();
  const auto* m = mask.const_data_ptr<int64_t>();
  PackedRows p;
  int64_t total = 0;
  for (int64_t r = 0; r < n; ++r) {
    int64_t len = 0;
    while (len < t && m[r * t + len] != 0) ++len;
    for (int64_t j = len; j < t; ++j)
      LF_CHECK(m[r * t + j] == 0, ConfigError, "padding-free rows: row {} is not right-padded (a real token at {} after "
               "padding at {}); set LF_PREF_PADDING_FREE=0", r, j, len);
    p.offsets.push_back(total);
    p.lengths.push_back(len);
    total += len;
  }
  const int64_t l = (total + kPackedMultiple - 1) / kPackedMultiple * kPackedMultiple;
  p.filler = l - total;
  const auto opts = at::TensorOptions().dtype(at::kLong);
  p.input_ids = at::empty({1, l}, opts);
  p.position_ids = at::empty({1, l}, opts);
  p.segment_ids = at::zeros({1, l}, opts);
  const auto ids = b.input_ids.contiguous();
  const auto* src = ids.const_data_ptr<int64_t>();
  auto *dst = p.input_ids.data_ptr<int64_t>(), *pos = p.position_ids.data_ptr<int64_t>();
  auto* seg = p.segment_ids.data_ptr<int64_t>();
  int64_t pad_token = src[0];  // the filler's token: one of b's pad positions' (a row shorter than T has one)
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < p.lengths[r]; ++j) {
      const int64_t k = p.offsets[r] + j;
      dst[k] = src[r * t + j], pos[k] = j, seg[k] = r + 1;
    }
    if (p.lengths[r] < t) pad_token = src[r * t + p.lengths[r]];
  }
  for (int64_t j = 0; j < p.filler; ++j) dst[total + j] = pad_token, pos[total + j] = j;
  return p;
}

std::vector<int64_t> ran_lengths(const model::CausalLM& m, const Batch& b) {
  const int64_t n = b.input_ids.size(0), t = b.input_ids.size(1);
  if (!preference_padding_free(m, b)) return std::vector<int64_t>(static_cast<size_t>(n), t);
  const auto mask = b.attention_mask.sum(1).contiguous();  // right-padded: each row's real tokens
  std::vector<int64_t> out(mask.const_data_ptr<int64_t>(), mask.const_data_ptr<int64_t>() + n);
  int64_t total = 0;
  for (const auto l : out) total += l;
  if (const int64_t filler = (total + kPackedMultiple - 1) / kPackedMultiple * kPackedMultiple - total; filler > 0)
    out.push_back(filler);
  return out;
}

at::Tensor packed_positions(const PackedRows& p, const at::Tensor& flat, int64_t t) {
  const auto f = flat.contiguous();
  auto out = at::empty_like(f);
  const auto* in = f.const_data_ptr<int64_t>();
  auto* o = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < f.numel(); ++i) {
    const int64_t row = in[i] / (t - 1), j = in[i] % (t - 1);
    LF_CHECK(j + 1 < p.lengths[static_cast<size_t>(row)], BackendError,
             "padding-free rows: a target at position {} of row {} past its {} real tokens", j + 1, row,
             p.lengths[static_cast<size_t>(row)]);
    o[i] = p.offsets[static_cast<size_t>(row)] + j;
  }
  return out;
}

}  // namespace lf::train
