// Qwen3's q/k norms (transformers' Qwen3Attention: q_norm(q_proj(x).view(.., H, D)), the same for
// k, then RoPE): an RMSNorm over each head's D features, weights through cast_for_compute as every
// other weight (RmsNorm::forward).
#include <ATen/ATen.h>

#include "lf/kernels/fused_ops.h"
#include "lf/model/fused_dispatch.h"
#include "lf/model/grad_sink.h"
#include "lf/model/layers.h"

namespace lf::model {

at::Tensor QkNorm::queries(const at::Tensor& q) const { return q_norm_.forward(q); }
at::Tensor QkNorm::keys(const at::Tensor& k) const { return k_norm_.forward(k); }

bool QkNorm::fuses(const at::Tensor& x) const {
  const auto* fused = fused_ops_for(x);
  if (!fused) return false;
  if (q_norm_.one_plus_ != k_norm_.one_plus_) return false;
  return q_norm_.one_plus_ ? fused->one_plus_rms_norm != nullptr : fused->head_rms_norm != nullptr;
}

// p [B*T, H*D] -> [B*T, H*D]: the same rows of D as RmsNorm::forward on the [B,T,H,D] view (Gemma's (1 + w)
// norm with its float32 weight).
at::Tensor QkNorm::fused_heads(const at::Tensor& p, const RmsNorm& norm, const kernels::FusedOps& fused) const {
  if (norm.one_plus_) return fused.one_plus_rms_norm(p, cast_for_compute(norm.weight_, at::kFloat), norm.eps_);
  return fused.head_rms_norm(p, cast_for_compute(norm.weight_, p.scalar_type()), norm.eps_);
}

void QkNorm::named_parameters(const std::string& prefix, std::vector<NamedParam>& out) {
  out.push_back({prefix + "q_norm.weight", &q_norm_.weight_});
  out.push_back({prefix + "k_norm.weight", &k_norm_.weight_});
}

}  // namespace lf::model
