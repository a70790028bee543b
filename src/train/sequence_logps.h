#pragma once
// The log-probability of each row's response under the model, as LLaMA-Factory's get_batch_logps
// computes it: logits[:, :-1] predict labels[:, 1:], -100 ignored, fp32 log_softmax, summed per row.
// Only the target positions go through the LM head (model::chunked_lm_head_logps); the logits' sum
// over every position and the vocabulary (TRL's logits/* metrics) comes from the identity
// sum_v logits[t, v] = h_t . sum_v W_v, without [N,T,V]. Through the strategy's unit hooks, as the
// trainer's own forward. Internal to lf_train.
#include <ATen/core/Tensor.h>

#include <optional>
#include <vector>

#include "lf/train/batch.h"
#include "objective.h"

namespace lf::train {

struct SequenceLogps {
  at::Tensor logps;       // [N] fp32 on the device: each row's summed target log-probabilities
  at::Tensor valid;       // [N] fp32 on the device: each row's target tokens (get_batch_logps' valid_length)
  at::Tensor logits_sum;  // [N] fp64 on the device, detached: sum of the row's logits over [T, V]
  // The positions each row ran (T padded; its real tokens padding-free, train/padding_free.h): what
  // logits_sum sums over, per vocabulary entry.
  std::vector<int64_t> positions;
  int64_t vocab = 0;      // V
};

// What a forward of sequence_logps changes from the policy's plain one.
struct LogpsOptions {
  // Another model than ctx.model (ref_model: whole on this rank, so without the strategy's unit hooks).
  model::CausalLM* model = nullptr;
  // LD-DPO (LLaMA-Factory's get_batch_logps with ld_alpha): rows are pairs (the first half chosen, the
  // second rejected); a target token at or past the pair's shorter response length (counted from the
  // row's first target) counts ld_alpha times.
  std::optional<double> ld_alpha;
};

// Rows `b` (collate()'d, on the host) of the model: differentiable when autograd is on. Padded rows run
// padding-free (train/padding_free.h) or padded, then under HF's padding mask where asked (model/key_padding.h):
// the pad positions' logits, which TRL's logits/* metrics average over, are LLaMA-Factory's; the
// log-probabilities do not depend on it.
SequenceLogps sequence_logps(const ObjectiveContext& ctx, const Batch& b, const LogpsOptions& options = {});

// LD-DPO's weight of each target position of `labels` [N, T] (host), flattened over the shifted [N, T-1]
// positions whose label is not ignored, in that order: 1 before the pair's public length, alpha after.
at::Tensor ld_weights(const at::Tensor& labels, double alpha);

// TRL's disable_dropout_in_model, which LLaMA-Factory's DPO and KTO trainers call: LoRA's dropout off.
void disable_dropout(model::CausalLM& model);

// The row indices of examples in the order the preference collators put them (pairwise: every
// chosen row, then every rejected row; kto's target rows: `second` false, its KL rows: true).
std::vector<int64_t> pair_rows(const std::vector<int64_t>& examples, bool second);
std::vector<int64_t> both_rows(const std::vector<int64_t>& examples);

}  // namespace lf::train
