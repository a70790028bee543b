#pragma once
// Padding-free preference rows (LF_PREF_PADDING_FREE, TRL's padding_free): a micro-batch of padded rows
// [N, T] (chosen and rejected responses of different lengths, each padded to the longest) runs as one row
// of their real tokens end to end, [1, L], each row a sequence of its own: positions from 0, attention
// within it (flash's varlen kernel on a GPU, neat_packing's path; the block-diagonal mask elsewhere). The
// pad positions' GEMMs and attention are not computed at all: on 2 pairs of 1,100-2,000 tokens, ~15% of a
// padded micro-batch. Every real position sees the same keys and positions as in its padded row, so the
// log-probabilities, losses and gradients are the padded run's up to the kernels' rounding; the
// logits/* metrics cover the real positions only (dpo's average them, kto's per-example sums drop the
// pad positions): not LLaMA-Factory's figure (its [B, T] means and sums include the pad positions),
// nor TRL's (the response tokens' mean, padded or padding-free). Internal to lf_train.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "lf/train/batch.h"

namespace lf::model {
class CausalLM;
}

namespace lf::train {

// L is the rows' real tokens rounded up to kPackedMultiple with a filler sequence (segment 0, its own
// attention, its outputs never read): a packed micro-batch's activations come in few sizes, which the
// caching allocator can reuse (one size a micro-batch left 73 GiB reserved for 51 allocated on 7B LoRA).
inline constexpr int64_t kPackedMultiple = 64;

struct PackedRows {
  at::Tensor input_ids;          // [1, L] int64, host
  at::Tensor position_ids;       // [1, L] int64, host: 0 at each row's first token
  at::Tensor segment_ids;        // [1, L] int64, host: row r's tokens are r + 1, the filler's 0
  std::vector<int64_t> offsets;  // where each row starts in L
  std::vector<int64_t> lengths;  // each row's real tokens (its attention_mask's sum)
  int64_t filler = 0;            // the filler's tokens at the end
};

// Whether `b`'s rows run padding-free under `m`: rows with padding, and LF_PREF_PADDING_FREE 1, or auto
// where the varlen kernel runs and the pad positions are not wanted under HF's mask (LF_PAD_MASKED_LOGITS).
bool preference_padding_free(const model::CausalLM& m, const Batch& b);

// b's rows (right-padded: real tokens are each attention_mask's leading 1s) end to end.
PackedRows pack_rows(const Batch& b);

// The positions each sequence of b's forward runs: T a row padded; padding-free each row's real tokens and
// the filler (what the device computes: the throughput and MFU figures count these).
std::vector<int64_t> ran_lengths(const model::CausalLM& m, const Batch& b);

// `flat` [M] int64 (host): positions b * (T - 1) + j of the padded rows' shifted [N, T - 1] layout ->
// the same positions in the packed row, offsets[b] + j.
at::Tensor packed_positions(const PackedRows& p, const at::Tensor& flat, int64_t t);

}  // namespace lf::train
