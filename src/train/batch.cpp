#include "lf/train/batch.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "lf/common/error.h"
#include "lf/model/loss.h"

namespace lf::train {

namespace {

// Labels != -100 of one example from position `first` on.
int64_t count_labels(const TokenizedDataset& data, int64_t index, size_t first) {
  const auto labels = data.labels(static_cast<size_t>(index));
  int64_t count = 0;
  for (size_t i = first; i < labels.size(); ++i) count += labels[i] != model::kIgnoreIndex;
  return count;
}

int64_t round_up(int64_t t, int64_t multiple) { return multiple > 1 ? (t + multiple - 1) / multiple * multiple : t; }

// Positions restarting at 0 with each packed sequence, with packing neat or not (LLaMA-Factory's
// packed position_ids), and under neat_packing the segment ids as stored (its attention_mask with
// indices: the model masks attention across them); the padding collate adds is segment 0, position 0.
void collate_segments(const TokenizedDataset& data, const std::vector<int64_t>& indices, int64_t t, Batch& out) {
  const auto b = static_cast<int64_t>(indices.size());
  out.position_ids = at::zeros({b, t}, at::TensorOptions().dtype(at::kLong));
  if (data.neat()) out.segment_ids = at::zeros({b, t}, at::TensorOptions().dtype(at::kLong));
  auto* seg = data.neat() ? out.segment_ids.data_ptr<int64_t>() : nullptr;
  auto* pos = out.position_ids.data_ptr<int64_t>();
  for (int64_t r = 0; r < b; ++r) {
    const auto src = data.segment_ids(static_cast<size_t>(indices[r]));
    int64_t p = 0;
    for (size_t j = 0; j < src.size(); ++j) {
      p = (j > 0 && src[j] == src[j - 1]) ? p + 1 : 0;
      if (seg) seg[r * t + static_cast<int64_t>(j)] = src[j];
      pos[r * t + static_cast<int64_t>(j)] = src[j] == 0 ? 0 : p;
    }
  }
}

}  // namespace

int64_t num_targets(const TokenizedDataset& data, int64_t index) { return count_labels(data, index, 1); }

int64_t hf_num_items(const TokenizedDataset& data, int64_t index) { return count_labels(data, index, 0); }

int64_t longest_padded_row(const TokenizedDataset& data, int64_t pad_to_multiple_of) {
  int64_t t = 0;
  for (size_t i = 0; i < data.size(); ++i) t = std::max<int64_t>(t, static_cast<int64_t>(data.input_ids(i).size()));
  return round_up(t, pad_to_multiple_of);
}

Batch collate(const TokenizedDataset& data, const std::vector<int64_t>& indices, int32_t pad_id,
              int64_t pad_to_multiple_of) {
  LF_CHECK(!indices.empty(), ConfigError, "collate: empty micro-batch");
  int64_t t = 0;
  for (auto i : indices) t = std::max<int64_t>(t, static_cast<int64_t>(data.input_ids(static_cast<size_t>(i)).size()));
  t = round_up(t, pad_to_multiple_of);
  const auto b = static_cast<int64_t>(indices.size());
  Batch out;
  out.input_ids = at::full({b, t}, static_cast<int64_t>(pad_id), at::TensorOptions().dtype(at::kLong));
  out.labels = at::full({b, t}, model::kIgnoreIndex, at::TensorOptions().dtype(at::kLong));
  out.attention_mask = at::zeros({b, t}, at::TensorOptions().dtype(at::kLong));
  auto* ids = out.input_ids.data_ptr<int64_t>();
  auto* mask = out.attention_mask.data_ptr<int64_t>();
  auto* lab = out.labels.data_ptr<int64_t>();
  if (data.has_segments()) collate_segments(data, indices, t, out);
  for (int64_t r = 0; r < b; ++r) {
    const auto src_ids = data.input_ids(static_cast<size_t>(indices[r]));
    const auto src_lab = data.labels(static_cast<size_t>(indices[r]));
    for (size_t j = 0; j < src_ids.size(); ++j) {
      ids[r * t + static_cast<int64_t>(j)] = src_ids[j];
      lab[r * t + static_cast<int64_t>(j)] = src_lab[j];
      mask[r * t + static_cast<int64_t>(j)] = 1;
      if (j > 0 && src_lab[j] != model::kIgnoreIndex) ++out.num_targets;
    }
    out.num_tokens += static_cast<int64_t>(src_ids.size());
  }
  return out;
}

}  // namespace lf::train

namespace lf::train {

Batch no_target_batch(int32_t pad_id, int64_t pad_to_multiple_of) {
  Batch out;
  out.input_ids = at::full({1, pad_to_multiple_of}, static_cast<int64_t>(pad_id), at::TensorOptions().dtype(at::kLong));
  out.labels = at::full({1, pad_to_multiple_of}, model::kIgnoreIndex, at::TensorOptions().dtype(at::kLong));
  out.attention_mask = at::zeros({1, pad_to_multiple_of}, at::TensorOptions().dtype(at::kLong));
  return out;
}

}  // namespace lf::train
