// One module per kind of block (model_layout.h's NormKind, AttentionKind, MlpKind): a new kind is a
// case here and its tensors' declaration in model_layout.cpp.
#include "lf/model/layer_builder.h"

#include <ATen/ATen.h>

#include "lf/common/error.h"
#include "lf/model/moe_block.h"

namespace lf::model {
namespace {

Linear make_linear(int64_t in, int64_t out, bool bias, const at::TensorOptions& o) {
  Linear l;
  l.weight_ = at::empty({out, in}, o);
  if (bias) l.bias_ = at::empty({out}, o);
  return l;
}

Attention make_attention(const AttentionSpec& a, NormKind norm, double eps, const at::TensorOptions& o) {
  LF_CHECK(a.kind == AttentionKind::kFullCausal || (a.kind == AttentionKind::kSlidingWindow && a.window > 0),
           ConfigError, "attention kind {} (window {}) has no module", static_cast<int>(a.kind), a.window);
  const int64_t q = a.heads * a.head_dim, kv = a.kv_heads * a.head_dim;
  Attention out;
  out.q_proj_ = make_linear(a.hidden, q, a.qkv_bias, o);
  out.k_proj_ = make_linear(a.hidden, kv, a.qkv_bias, o);
  out.v_proj_ = make_linear(a.hidden, kv, a.qkv_bias, o);
  out.o_proj_ = make_linear(q, a.hidden, a.o_bias, o);
  if (a.qk_norm)
    out.qk_norm_ = std::make_unique<QkNorm>(QkNorm{build_norm(norm, a.head_dim, eps, o), build_norm(norm, a.head_dim, eps, o)});
  out.num_heads_ = a.heads;
  out.num_kv_heads_ = a.kv_heads;
  out.head_dim_ = a.head_dim;
  out.scale_ = a.scale;
  out.window_ = a.kind == AttentionKind::kSlidingWindow ? a.window : 0;
  out.local_rope_ = a.local_rope;
  return out;
}

std::unique_ptr<Mlp> make_swiglu(int64_t hidden, int64_t intermediate, bool bias, const at::TensorOptions& o) {
  auto mlp = std::make_unique<Mlp>();
  mlp->gate_proj_ = make_linear(hidden, intermediate, bias, o);
  mlp->up_proj_ = make_linear(hidden, intermediate, bias, o);
  mlp->down_proj_ = make_linear(intermediate, hidden, bias, o);
  return mlp;
}

std::unique_ptr<FeedForward> make_moe(const MlpSpec& m, RouterAuxLoss* aux, const at::TensorOptions& o) {
  const auto& e = m.moe;
  auto moe = std::make_unique<MoeBlock>();
  moe->spec = e;
  moe->gate_ = at::empty({e.experts, m.hidden}, o);
  moe->gate_up_ = at::empty({e.experts, 2 * e.expert_intermediate, m.hidden}, o);
  moe->down_ = at::empty({e.experts, m.hidden, e.expert_intermediate}, o);
  if (e.shared_intermediate > 0) moe->shared_expert_ = make_swiglu(m.hidden, e.shared_intermediate, false, o);
  if (e.shared_gate) moe->shared_expert_gate_ = std::make_unique<Linear>(make_linear(m.hidden, 1, false, o));
  moe->aux_ = aux;
  return moe;
}

std::unique_ptr<FeedForward> make_mlp(const MlpSpec& m, RouterAuxLoss* aux, const at::TensorOptions& o) {
  switch (m.kind) {
    case MlpKind::kSwiGlu: {
      auto mlp = make_swiglu(m.hidden, m.intermediate, m.bias, o);
      mlp->gelu_tanh_ = m.activation == MlpActivation::kGeluTanh;
      return mlp;
    }
    case MlpKind::kMoe: return make_moe(m, aux, o);
  }
  LF_THROW(ConfigError, "MLP kind {} has no module", static_cast<int>(m.kind));
}

}  // namespace

RmsNorm build_norm(NormKind kind, int64_t size, double eps, const at::TensorOptions& o) {
  switch (kind) {
    case NormKind::kRms: return {at::empty({size}, o), eps};
    case NormKind::kRmsOnePlus: return {at::empty({size}, o), eps, /*one_plus=*/true};
  }
  LF_THROW(ConfigError, "norm kind {} has no module", static_cast<int>(kind));
}

DecoderLayer build_decoder_layer(const LayerSpec& l, const at::TensorOptions& o, RouterAuxLoss* aux) {
  DecoderLayer out;
  out.input_layernorm_ = build_norm(l.norm, l.attention.hidden, l.norm_eps, o);
  out.self_attn_ = make_attention(l.attention, l.norm, l.norm_eps, o);
  out.post_attention_layernorm_ = build_norm(l.norm, l.mlp.hidden, l.norm_eps, o);
  out.mlp_ = make_mlp(l.mlp, aux, o);
  if (l.sandwich_norms) {
    out.attn_out_norm_ = std::make_unique<RmsNorm>(build_norm(l.norm, l.attention.hidden, l.norm_eps, o));
    out.mlp_out_norm_ = std::make_unique<RmsNorm>(build_norm(l.norm, l.mlp.hidden, l.norm_eps, o));
  }
  return out;
}

}  // namespace lf::model
