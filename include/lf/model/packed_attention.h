#pragma once
// neat_packing's attention: tokens of a packed row attend causally within their own sequence
// only, as LLaMA-Factory's prepare_4d_attention_mask builds it from the segment ids
// ("attention_mask with indices": 1, 2, ... per sequence, 0 for padding). Padding tokens attend
// to themselves alone (LLaMA-Factory masks their rows completely; their outputs carry no
// target either way, and a fully masked row would give NaN through SDPA's boolean mask).
#include <ATen/core/Tensor.h>

namespace lf::model {

// segment_ids [B,T] (integer) -> [B,1,T,T] bool, true where query t may attend to key s.
at::Tensor packed_causal_mask(const at::Tensor& segment_ids);

}  // namespace lf::model
