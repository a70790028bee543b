#include "lf/model/layers.h"

#include <ATen/ATen.h>

#include "lf/model/grad_sink.h"
#include "lf/model/sdpa.h"

namespace lf::model {
namespace {

// The weight in the activation dtype (autocast semantics: autograd carries the
// gradient back to the stored dtype, or into the weight's route: grad_sink.h).
at::Tensor as(const at::Tensor& w, const at::Tensor& x) { return cast_for_compute(w, x.scalar_type()); }

// q/k [B,H,T,D]; cos/sin [T,D] or [B,1,T,D]. rotate_half(x) = cat(-x2, x1).
at::Tensor apply_rope(const at::Tensor& x, const RopeTables& rope) {
  const int64_t half = x.size(-1) / 2;
  auto x1 = x.narrow(-1, 0, half);
  auto x2 = x.narrow(-1, half, half);
  auto rotated = at::cat({x2.neg(), x1}, -1);
  return x * rope.cos + rotated * rope.sin;
}

}  // namespace

at::Tensor Linear::forward(const at::Tensor& x, bool training) const {
  auto y = at::linear(x, as(weight_, x),
                      bias_.defined() ? std::optional<at::Tensor>(as(bias_, x)) : std::nullopt);
  if (lora_) {
    auto h = lora_->dropout_ > 0 ? at::dropout(x, lora_->dropout_, training) : x;
    h = at::linear(at::linear(h, as(lora_->a_, x)), as(lora_->b_, x));
    y = y + h * lora_->scaling_;
  }
  return y;
}

void Linear::named_parameters(const std::string& prefix, std::vector<NamedParam>& out) {
  out.push_back({prefix + "weight", &weight_});
  if (bias_.defined()) out.push_back({prefix + "bias", &bias_});
}

at::Tensor RmsNorm::forward(const at::Tensor& x) const {
  auto h = x.to(at::kFloat);
  h = h * at::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return as(weight_, x) * h.to(x.scalar_type());
}

at::Tensor Attention::forward(const at::Tensor& x, const RopeTables& rope, bool training) const {
  const int64_t b = x.size(0), t = x.size(1);
  // [B,T,H*D] -> [B,T,H,D] (-> Qwen3's q/k norms) -> [B,H,T,D]
  auto q = q_proj_.forward(x, training).view({b, t, num_heads_, head_dim_});
  auto k = k_proj_.forward(x, training).view({b, t, num_kv_heads_, head_dim_});
  if (qk_norm_) q = qk_norm_->queries(q), k = qk_norm_->keys(k);
  q = q.transpose(1, 2);
  k = k.transpose(1, 2);
  auto v = v_proj_.forward(x, training).view({b, t, num_kv_heads_, head_dim_}).transpose(1, 2);
  q = apply_rope(q, rope);
  k = apply_rope(k, rope);
  auto o = causal_attention(q, k, v);                              // [B,H,T,D]
  o = o.transpose(1, 2).reshape({b, t, num_heads_ * head_dim_});  // [B,T,H*D]
  return o_proj_.forward(o, training);
}

at::Tensor Mlp::forward(const at::Tensor& x, bool training) const {
  return down_proj_.forward(at::silu(gate_proj_.forward(x, training)) * up_proj_.forward(x, training), training);
}

at::Tensor DecoderLayer::forward(const at::Tensor& x, const RopeTables& rope, bool training) const {
  auto h = x + self_attn_.forward(input_layernorm_.forward(x), rope, training);
  return h + mlp_.forward(post_attention_layernorm_.forward(h), training);
}

void DecoderLayer::named_parameters(const std::string& prefix, std::vector<NamedParam>& out) {
  out.push_back({prefix + "input_layernorm.weight", &input_layernorm_.weight_});
  for (auto& [name, lin] : linears()) {
    const bool attn = name.size() == 6 && name[1] == '_';  // q_proj k_proj v_proj o_proj
    lin->named_parameters(prefix + (attn ? "self_attn." : "mlp.") + name + ".", out);
    if (name == "o_proj" && self_attn_.qk_norm_) self_attn_.qk_norm_->named_parameters(prefix + "self_attn.", out);
  }
  out.push_back({prefix + "post_attention_layernorm.weight", &post_attention_layernorm_.weight_});
}

std::vector<std::pair<std::string, Linear*>> DecoderLayer::linears() {
  return {{"q_proj", &self_attn_.q_proj_},   {"k_proj", &self_attn_.k_proj_}, {"v_proj", &self_attn_.v_proj_},
          {"o_proj", &self_attn_.o_proj_},   {"gate_proj", &mlp_.gate_proj_}, {"up_proj", &mlp_.up_proj_},
          {"down_proj", &mlp_.down_proj_}};
}

}  // namespace lf::model
