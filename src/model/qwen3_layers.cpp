// Qwen3's q/k norms (transformers' Qwen3Attention: q_norm(q_proj(x).view(.., H, D)), the same for
// k, then RoPE): an RMSNorm over each head's D features, weights through cast_for_compute as every
// other weight (RmsNorm::forward).
#include <ATen/ATen.h>

#include "lf/model/layers.h"

namespace lf::model {

at::Tensor QkNorm::queries(const at::Tensor& q) const { return q_norm_.forward(q); }
at::Tensor QkNorm::keys(const at::Tensor& k) const { return k_norm_.forward(k); }

void QkNorm::named_parameters(const std::string& prefix, std::vector<NamedParam>& out) {
  out.push_back({prefix + "q_norm.weight", &q_norm_.weight_});
  out.push_back({prefix + "k_norm.weight", &k_norm_.weight_});
}

}  // namespace lf::model
