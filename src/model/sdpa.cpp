// The SDPA adapter (see sdpa.h). Backend ids are sdp::SDPBackend's values.
#include "lf/model/sdpa.h"

#include <ATen/ATen.h>

namespace lf::model {
namespace {

constexpr int64_t kBackendMath = 0;

const char* backend_label(int64_t id) {
  switch (id) {
    case 0: return "math";
    case 1: return "flash_attention";
    case 2: return "efficient_attention";
    case 3: return "cudnn_attention";
    case 4: return "overrideable";
    default: return "error";
  }
}

// [B,K,T,D] -> [B,K*n_rep,T,D], each kv head repeated for its group of query heads.
at::Tensor repeat_kv(const at::Tensor& x, int64_t n_rep) {
  if (n_rep == 1) return x;
  const auto b = x.size(0), k = x.size(1), t = x.size(2), d = x.size(3);
  return x.unsqueeze(2).expand({b, k, n_rep, t, d}).reshape({b, k * n_rep, t, d});
}

int64_t choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool gqa) {
  return at::_fused_sdp_choice(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true,
                               /*scale=*/std::nullopt, /*enable_gqa=*/gqa);
}

// Native GQA only when it keeps a fused kernel (or when nothing fused runs anyway).
bool use_native_gqa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  if (q.size(1) == k.size(1)) return false;
  if (choice(q, k, v, true) != kBackendMath) return true;
  const int64_t n_rep = q.size(1) / k.size(1);
  return choice(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), false) == kBackendMath;
}

}  // namespace

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale) {
  const int64_t n_rep = q.size(1) / k.size(1);
  const auto s = scale > 0 ? std::optional<double>(scale) : std::nullopt;
  if (n_rep == 1 || use_native_gqa(q, k, v))
    return at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true, s, /*enable_gqa=*/n_rep != 1);
  return at::scaled_dot_product_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), {}, 0.0, true, s);
}

at::Tensor masked_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                            double scale) {
  const int64_t n_rep = q.size(1) / k.size(1);
  const auto s = scale > 0 ? std::optional<double>(scale) : std::nullopt;
  return at::scaled_dot_product_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), mask, 0.0, /*is_causal=*/false, s);
}

void use_sdpa_backend(const std::string& name, bool lengths_vary) {
  auto& ctx = at::globalContext();
  const bool all = name == "auto" || name == "torch";
  ctx.setSDPUseCuDNN(name == "cudnn" || name == "torch" || (name == "auto" && !lengths_vary));
  ctx.setSDPUseFlash(all || name == "flash");
  ctx.setSDPUseMemEfficient(all || name == "efficient");
  ctx.setSDPUseMath(true);
}

std::string sdpa_backend_name(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const int64_t n_rep = q.size(1) / k.size(1);
  if (n_rep == 1) return backend_label(choice(q, k, v, false));
  if (use_native_gqa(q, k, v)) return std::string(backend_label(choice(q, k, v, true))) + "+gqa";
  return std::string(backend_label(choice(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), false))) + "+repeat_kv";
}

std::string sdpa_backend_for(int64_t batch, int64_t seq, int64_t heads, int64_t kv_heads, int64_t head_dim,
                             const at::TensorOptions& options) {
  auto q = at::empty({batch, heads, seq, head_dim}, options).requires_grad_();
  auto k = at::empty({batch, kv_heads, seq, head_dim}, options).requires_grad_();
  return sdpa_backend_name(q, k, k);
}

}  // namespace lf::model
