#pragma once
// Collation of tokenized examples into a padded micro-batch, as LLaMA-Factory's
// SFT collator does it: right padding with the tokenizer's pad id, labels padded
// with -100, length rounded up to a multiple (8 in LLaMA-Factory training).
// Right padding + causal attention needs no attention mask: pad positions come
// after every real token and carry no target.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "lf/data/tokenized_dataset.h"

namespace lf::train {

struct Batch {
  at::Tensor input_ids;  // [B,T] int64 (CPU)
  at::Tensor labels;     // [B,T] int64, -100 = no target
  // Packed rows only (else undefined): each token's position within its sequence (0 for padding),
  // for RoPE; under neat_packing also its sequence in the pack (0: padding), for the block-diagonal
  // causal mask (else undefined: attention spans the row, as LLaMA-Factory's plain packing).
  at::Tensor segment_ids;   // [B,T] int64
  at::Tensor position_ids;  // [B,T] int64
  // [B,T] int64, 1 on real tokens, 0 on the padding collate adds (HF's attention_mask): which tokens
  // the mixture-of-experts load-balancing loss counts (router_aux_loss.h).
  at::Tensor attention_mask;
  int64_t num_targets = 0;  // labels[:, 1:] != -100: the tokens the loss sums over
  int64_t num_tokens = 0;   // real (unpadded) input tokens
};

// Rows are padded to a multiple of this (HF's DataCollatorForSeq2Seq pad_to_multiple_of=8).
constexpr int64_t kPadToMultipleOf = 8;

Batch collate(const TokenizedDataset& data, const std::vector<int64_t>& indices, int32_t pad_id,
              int64_t pad_to_multiple_of = kPadToMultipleOf);

// One row of pad tokens without targets (zero loss, zero gradients): the forward a rank runs
// when it has no example but its strategy's collectives live in the forward (ZeRO-3).
Batch no_target_batch(int32_t pad_id, int64_t pad_to_multiple_of = kPadToMultipleOf);

// The longest row collate() can make from `data`: its longest example, padded.
int64_t longest_padded_row(const TokenizedDataset& data, int64_t pad_to_multiple_of = kPadToMultipleOf);

// Number of target tokens of one example (its labels after the causal shift).
int64_t num_targets(const TokenizedDataset& data, int64_t index);

// HF Trainer's num_items_in_batch for one example: labels != -100 *before* the shift. The
// training loss divides by it (DESIGN "Loss", as HF computes it): with train_on_prompt the
// first position's label, never predicted, still counts in the denominator.
int64_t hf_num_items(const TokenizedDataset& data, int64_t index);

}  // namespace lf::train
