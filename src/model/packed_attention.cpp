#include "lf/model/packed_attention.h"

#include <ATen/ATen.h>

#include "lf/common/error.h"

namespace lf::model {

at::Tensor packed_causal_mask(const at::Tensor& segment_ids) {
  LF_CHECK(segment_ids.dim() == 2, ConfigError, "segment_ids must be [B,T], got {} dims", segment_ids.dim());
  const int64_t t = segment_ids.size(1);
  const auto q = segment_ids.unsqueeze(2), k = segment_ids.unsqueeze(1);  // [B,T,1], [B,1,T]
  const auto causal = at::ones({t, t}, segment_ids.options().dtype(at::kBool)).tril();
  const auto self = at::eye(t, segment_ids.options().dtype(at::kBool));
  return (((q == k) & (k != 0)) | self).logical_and(causal).unsqueeze(1);
}

}  // namespace lf::model
