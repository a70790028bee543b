// Incremental decoding with a key/value cache (lf/model/kv_decode.h): the decoder layer's math of
// layers.cpp (norms, projections, Qwen3's q/k norms, RoPE, SDPA, the residuals, the FeedForward) with the
// keys and values of earlier positions read from the cache instead of recomputed.
#include "lf/model/kv_decode.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "lf/common/error.h"
#include "lf/model/sdpa.h"

namespace lf::model {
namespace {

// rotate_half RoPE: x [B,H,T,D], cos/sin [B,1,T,D].
at::Tensor rotate(const at::Tensor& x, const RopeTables& rope) {
  const int64_t half = x.size(-1) / 2;
  const auto rotated = at::cat({x.narrow(-1, half, half).neg(), x.narrow(-1, 0, half)}, -1);
  return x * rope.cos + rotated * rope.sin;
}

// One layer's attention over the cache; writes this step's keys / values at [start, start + T).
at::Tensor attend(const Attention& a, const at::Tensor& x, const RopeTables& rope, const at::Tensor& mask,
                  at::Tensor& k_cache, at::Tensor& v_cache, int64_t start) {
  const int64_t b = x.size(0), t = x.size(1), h = a.num_heads_, kv = a.num_kv_heads_, d = a.head_dim_;
  auto q = a.q_proj_.forward(x, false).view({b, t, h, d});
  auto k = a.k_proj_.forward(x, false).view({b, t, kv, d});
  if (a.qk_norm_) q = a.qk_norm_->queries(q), k = a.qk_norm_->keys(k);
  q = rotate(q.transpose(1, 2), rope);  // [B,H,T,D]
  k = rotate(k.transpose(1, 2), rope);  // [B,K,T,D]
  const auto v = a.v_proj_.forward(x, false).view({b, t, kv, d}).transpose(1, 2);
  k_cache.narrow(2, start, t).copy_(k);
  v_cache.narrow(2, start, t).copy_(v);
  const int64_t s = start + t;
  auto o = masked_attention(q, k_cache.narrow(2, 0, s), v_cache.narrow(2, 0, s), mask);  // [B,H,T,D]
  return a.o_proj_.forward(o.transpose(1, 2).reshape({b, t, h * d}), false);
}

}  // namespace

KvCache::KvCache(const CausalLM& model, int64_t batch, int64_t capacity) : capacity_(capacity) {
  const auto& c = model.config();
  const auto options = model.lm_head_weight().options().dtype(model.compute_dtype());
  for (int64_t i = 0; i < model.num_layers(); ++i) {
    keys.push_back(at::empty({batch, c.num_kv_heads, capacity, c.head_dim}, options));
    values.push_back(at::empty({batch, c.num_kv_heads, capacity, c.head_dim}, options));
  }
}

at::Tensor decode_step(const CausalLM& model, const at::Tensor& input_ids, const at::Tensor& position_ids,
                       const at::Tensor& key_mask, KvCache& cache) {
  c10::NoGradGuard no_grad;
  const int64_t b = input_ids.size(0), t = input_ids.size(1), start = cache.length_, s = start + t;
  LF_CHECK(s <= cache.capacity_, BackendError, "decode_step: {} positions exceed the cache's {}", s, cache.capacity_);
  LF_CHECK(key_mask.size(0) == b && key_mask.size(1) == s, BackendError,
           "decode_step: key_mask is [{}, {}], expected [{}, {}]", key_mask.size(0), key_mask.size(1), b, s);
  const auto device = model.lm_head_weight().device();
  const auto rope = model.rope(t, position_ids.to(device));
  // [B,1,T,S]: a key is seen when it is real and not after the query; a query seeing none sees itself.
  const auto keys_real = key_mask.to(device).view({b, 1, 1, s});
  const auto query_at = at::arange(start, s, at::TensorOptions().dtype(at::kLong).device(device)).view({1, 1, t, 1});
  const auto key_at = at::arange(s, at::TensorOptions().dtype(at::kLong).device(device)).view({1, 1, 1, s});
  auto mask = keys_real & (key_at <= query_at);
  mask = mask | (mask.any(-1, /*keepdim=*/true).logical_not() & (key_at == query_at));
  auto x = model.embed(input_ids.to(device));  // [B,T,C]
  for (int64_t i = 0; i < model.num_layers(); ++i) {
    const auto& l = model.layers()[static_cast<size_t>(i)];
    const auto hmid = x + attend(l.self_attn_, l.input_layernorm_.forward(x), rope, mask, cache.keys[i],
                                 cache.values[i], start);
    x = hmid + l.mlp_->forward(l.post_attention_layernorm_.forward(hmid), false);
  }
  cache.length_ = s;
  return model.head(x.narrow(1, t - 1, 1)).squeeze(1).to(at::kFloat);  // [B,V]
}

}  // namespace lf::model
