#pragma once
// Incremental decoding with a key/value cache, for generation (predict; later PPO's rollouts). Inference
// only (no autograd), one device. The cache holds every layer's keys and values for `capacity` positions of
// each row; a step runs the new tokens through the layers (their own Linear, norms and FeedForward: LoRA
// and any family's MLP act as in training), writes their keys / values after the cached ones, and attends
// over the cache under `key_mask` (left padding: a row's pad positions are never attended) and causality,
// as transformers' generate does with an attention_mask. A query position with nothing to attend (a pad
// query) attends to itself, so no NaN reaches a real row through a pad's values.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "lf/model/causal_lm.h"

namespace lf::model {

class KvCache {
 public:
  // Room for `capacity` positions of `batch` rows, in the model's compute dtype on its device.
  KvCache(const CausalLM& model, int64_t batch, int64_t capacity);
  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }

  std::vector<at::Tensor> keys, values;  // per layer [B,K,capacity,D]

 private:
  friend at::Tensor decode_step(const CausalLM&, const at::Tensor&, const at::Tensor&, const at::Tensor&, KvCache&);
  int64_t length_ = 0;
  int64_t capacity_ = 0;
};

// input_ids [B,T] (the prompt on the first call, then one token a row), position_ids [B,T] (RoPE positions:
// a row's real tokens count from 0 after its left padding), key_mask [B, length + T] bool over the cached
// positions and these (false: padding). Appends the T positions to the cache; returns the last position's
// logits [B,V] fp32.
at::Tensor decode_step(const CausalLM& model, const at::Tensor& input_ids, const at::Tensor& position_ids,
                       const at::Tensor& key_mask, KvCache& cache);

}  // namespace lf::model
