#include "lf/model/layers.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <tuple>

#include "lf/kernels/fused_ops.h"
#include "lf/model/backward_only_linear.h"
#include "lf/model/format_lora_linear.h"
#include "lf/model/fp8_linear.h"
#include "lf/model/fused_dispatch.h"
#include "lf/model/grad_sink.h"
#include "lf/model/key_padding.h"
#include "lf/model/lora_linear.h"
#include "lf/model/master_weight_linear.h"
#include "lf/model/sdpa.h"

namespace lf::model {
namespace {

// The weight in the activation dtype (autocast semantics: autograd carries the
// gradient back to the stored dtype, or into the weight's route: grad_sink.h).
at::Tensor as(const at::Tensor& w, const at::Tensor& x) { return cast_for_compute(w, x.scalar_type()); }

// q/k [B,H,T,D]; cos/sin [T,D] or [B,1,T,D]. rotate_half(x) = cat(-x2, x1).
at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  auto x1 = x.narrow(-1, 0, half);
  auto x2 = x.narrow(-1, half, half);
  auto rotated = at::cat({x2.neg(), x1}, -1);
  return x * cos + rotated * sin;
}

// Causal over the row, or within each packed sequence (neat_packing): the varlen kernel on a
// GPU, the block-diagonal mask elsewhere. A sliding-window layer's mask keeps keys
// i - window < j <= i of it (transformers' create_sliding_window_causal_mask). scale 0: 1/sqrt(D).
at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const RopeTables& rope,
                     double scale, int64_t window) {
  if (window > 0) {
    const int64_t t = q.size(2);
    // On a GPU, flash's own window within each row (or packed sequence): no [T, T] mask, no work outside it.
    // rope.varlen defined: packed sequences the varlen kernel must keep apart (the mask below would not).
    if (rope.varlen.defined() || (!rope.attn_mask.defined() && !key_padding_mask(t).defined() &&
                                  varlen_attention_supported(q.device(), q.scalar_type(), q.size(3))))
      return varlen_causal_attention(q, k, v, rope.varlen.defined() ? rope.varlen : rows_as_segments(q.size(0), t, q.device()),
                                     scale, window);
    const auto i = at::arange(t, at::TensorOptions().dtype(at::kLong).device(q.device()));
    const auto d = i.unsqueeze(1) - i.unsqueeze(0);  // [T, T]: query - key
    auto mask = at::logical_and(d >= 0, d < window);
    if (rope.attn_mask.defined()) mask = at::logical_and(rope.attn_mask, mask);
    if (const auto pad_mask = key_padding_mask(t); pad_mask.defined()) mask = at::logical_and(pad_mask, mask);
    return masked_attention(q, k, v, mask.dim() == 2 ? mask.view({1, 1, t, t}) : mask, scale);
  }
  if (rope.varlen.defined()) return varlen_causal_attention(q, k, v, rope.varlen, scale);
  if (rope.attn_mask.defined()) return masked_attention(q, k, v, rope.attn_mask, scale);
  // A KeyPaddingScope (key_padding.h): HF's padding mask on right-padded rows.
  if (const auto pad_mask = key_padding_mask(q.size(2)); pad_mask.defined())
    return masked_attention(q, k, v, pad_mask, scale);
  return causal_attention(q, k, v, scale);
}

// silu(gate) * up on the fused path. Where down's forward casts its input to FP8 rowwise, by the kernel that
// also writes act's cast, handed to that forward (quant::fp8_seed_forward_cast): act is not read again to be
// cast. Not for a recompute that leaves down's output unwritten (down_values false): nothing casts act there.
// Where gate_proj's and up_proj's weights are stored in FP8 rowwise (LoRA's frozen base) and their input x takes a
// gradient, the backward also casts dgate and dup for their input gradients in its pass
// (quant::fp8_seed_grad_input_cast); where x takes none (LoRA's first layer) nothing would read those casts.
at::Tensor fused_swiglu(const kernels::FusedOps& ops, const at::Tensor& gate, const at::Tensor& up, const Mlp& mlp,
                        bool down_values, bool x_grad) {
  const auto r = ops.swiglu_fp8 && down_values ? fp8_input_recipe(mlp.down_proj_) : quant::Fp8Recipe::kNone;
  const bool act_cast = quant::fp8_rowwise(r);
  const auto s = quant::fp8_input_scaling(r, -1);
  quant::Fp8Tensor cast;
  at::Tensor act;
  if (ops.swiglu_fp8_grads && x_grad && at::GradMode::is_enabled()) {
    const auto gs = fp8_stored_rowwise_scale(mlp.gate_proj_), us = fp8_stored_rowwise_scale(mlp.up_proj_);
    if (gs.defined() && us.defined())
      act = ops.swiglu_fp8_grads(gate, up, act_cast ? &s : nullptr, act_cast ? &cast : nullptr, gs, us);
  }
  if (!act.defined() && act_cast) act = ops.swiglu_fp8(gate, up, s, cast);
  if (act.defined() && cast.data.defined()) quant::fp8_seed_forward_cast(act, r, cast);
  return act.defined() ? act : ops.swiglu(gate, up);
}

}  // namespace

at::Tensor Linear::forward(const at::Tensor& x, bool training) const { return forward_with(x, training, true); }

at::Tensor Linear::forward_for_backward(const at::Tensor& x, bool training) const {
  return forward_with(x, training, /*base_values=*/false);
}

at::Tensor Linear::forward_with(const at::Tensor& x, bool training, bool base_values) const {
  if (lora_ && lora_->magnitude_.defined()) return forward_dora(x, training);
  if (oft_) return forward_oft(x, base_values);
  const bool fused = fused_ops_for(x) != nullptr;
  if (format_) {
    const auto b = bias_.defined() ? as(bias_, x) : at::Tensor();
    if (fused && lora_ && lora_->dropout_ == 0 && format_->has_product() && !(b.defined() && b.requires_grad()) &&
        fused_lora_enabled())
      return format_lora_linear(x, *format_, b, as(lora_->a_, x), as(lora_->b_, x), lora_->scaling_, base_values);
    return add_lora(format_->linear(x, b, base_values), x, training, fused);
  }
  if (fp8_ != quant::Fp8Recipe::kNone) {
    auto y = fp8_linear(x, as(weight_, x), fp8_, base_values);
    return add_lora(bias_.defined() ? y + as(bias_, x) : y, x, training, fused);
  }
  if (fused && !lora_ && !bias_.defined() && weight_.requires_grad() && weight_.scalar_type() == at::kFloat &&
      x.scalar_type() != at::kFloat && grad_route(weight_) == nullptr && fp32_weight_grads_enabled())
    return master_weight_linear(x, weight_, base_values);
  const auto w = as(weight_, x);
  const auto b = bias_.defined() ? as(bias_, x) : at::Tensor();
  if (fused && lora_ && lora_->dropout_ == 0 && !w.requires_grad() && !(b.defined() && b.requires_grad()) &&
      fused_lora_enabled())
    return lora_linear(x, w, b, as(lora_->a_, x), as(lora_->b_, x), lora_->scaling_, base_values);
  auto y = base_values ? at::linear(x, w, b.defined() ? std::optional<at::Tensor>(b) : std::nullopt)
                       : backward_only_linear(x, w, b);
  return add_lora(y, x, training, fused);
}

at::Tensor Linear::add_lora(const at::Tensor& y, const at::Tensor& x, bool training, bool fused) const {
  if (!lora_) return y;
  if (fused) return add_lora_accumulated(y, x, training);
  auto h = lora_->dropout_ > 0 ? at::dropout(x, lora_->dropout_, training) : x;
  h = at::linear(at::linear(h, as(lora_->a_, x)), as(lora_->b_, x));
  return y + h * lora_->scaling_;
}

// LoRA's update accumulated into the base output y by its second GEMM (addmm: beta 1, alpha
// scaling), instead of h * scaling and y + h: two [N, out] passes fewer in the forward and one
// in the backward, and one rounding instead of three.
at::Tensor Linear::add_lora_accumulated(const at::Tensor& y, const at::Tensor& x, bool training) const {
  const int64_t out = out_features();
  auto h = lora_->dropout_ > 0 ? at::dropout(x, lora_->dropout_, training) : x;
  h = at::linear(h, as(lora_->a_, x));  // [.., r]
  auto sum = at::addmm(y.reshape({-1, out}), h.reshape({-1, h.size(-1)}), as(lora_->b_, x).t(), 1.0, lora_->scaling_);
  if (x.dim() == 2) return sum;  // not a view: the fused RoPE may rotate q/k in place
  auto sizes = x.sizes().vec();
  sizes.back() = out;
  return sum.view(sizes);
}

void Linear::named_parameters(const std::string& prefix, std::vector<NamedParam>& out) {
  if (format_) format_->named_storage(prefix, out);
  else out.push_back({prefix + "weight", &weight_});
  if (bias_.defined()) out.push_back({prefix + "bias", &bias_});
}

// Each forward below runs the fused kernels when fused_ops_for(x) gives them (CUDA), else the
// ATen code after it, which is the reference the kernels are tested against (tests/kernels).

at::Tensor RmsNorm::forward(const at::Tensor& x) const {
  if (one_plus_) {  // Gemma: everything in fp32, one rounding at the end
    const auto w = cast_for_compute(weight_, at::kFloat);
    if (const auto* fused = fused_ops_for(x); fused && fused->one_plus_rms_norm) return fused->one_plus_rms_norm(x, w, eps_);
    auto h = x.to(at::kFloat);
    h = h * at::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps_);
    return (h * (1.0 + w)).to(x.scalar_type());
  }
  if (const auto* fused = fused_ops_for(x)) return fused->rms_norm(x, as(weight_, x), eps_);
  auto h = x.to(at::kFloat);
  h = h * at::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return as(weight_, x) * h.to(x.scalar_type());
}

at::Tensor Attention::forward(const at::Tensor& x, const RopeTables& rope, bool training) const {
  return forward_with(x, rope, training, true);
}

at::Tensor Attention::forward_for_backward(const at::Tensor& x, const RopeTables& rope, bool training) const {
  return forward_with(x, rope, training, /*o_values=*/false);
}

at::Tensor Attention::forward_with(const at::Tensor& x, const RopeTables& rope, bool training, bool o_values) const {
  const int64_t b = x.size(0), t = x.size(1);
  const auto out = [&](const at::Tensor& o) {
    return o_values ? o_proj_.forward(o, training) : o_proj_.forward_for_backward(o, training);
  };
  const auto& cos = local_rope_ ? rope.local_cos : rope.cos;
  const auto& sin = local_rope_ ? rope.local_sin : rope.sin;
  // Qwen3's q/k norms sit between the projections and RoPE: on the fused path the head norm keeps
  // the 2-D shape (no view), so RoPE still rotates in place. The ATen RoPE on [B,H,T,D] views costs
  // ~20 strided passes over q and k a layer (rotate_half's cat, broadcast muls; docs/BENCHMARKS.md).
  if (const auto* fused = qk_norm_ && !qk_norm_->fuses(x) ? nullptr : fused_ops_for(x)) {
    // 2-D projections: their outputs are then not views, so RoPE may rotate them in place.
    const auto x2 = x.reshape({b * t, x.size(2)});
    auto q = q_proj_.forward(x2, training);  // [B*T, H*D]
    auto k = k_proj_.forward(x2, training);  // [B*T, K*D]
    if (qk_norm_) {  // Qwen3: per-head norms on the 2-D projections, then RoPE in place
      q = qk_norm_->fused_heads(q, qk_norm_->q_norm_, *fused);
      k = qk_norm_->fused_heads(k, qk_norm_->k_norm_, *fused);
    }
    auto v = v_proj_.forward(x2, training).view({b, t, num_kv_heads_, head_dim_}).transpose(1, 2);
    std::tie(q, k) = fused->rope_qk(q, k, cos, sin, t, head_dim_);
    auto o = attention(q.view({b, t, num_heads_, head_dim_}).transpose(1, 2),
                       k.view({b, t, num_kv_heads_, head_dim_}).transpose(1, 2), v, rope, scale_, window_);  // [B,H,T,D]
    return out(o.transpose(1, 2).reshape({b, t, num_heads_ * head_dim_}));
  }
  // [B,T,H*D] -> [B,T,H,D] (-> Qwen3's q/k norms) -> [B,H,T,D]
  auto q = q_proj_.forward(x, training).view({b, t, num_heads_, head_dim_});
  auto k = k_proj_.forward(x, training).view({b, t, num_kv_heads_, head_dim_});
  if (qk_norm_) q = qk_norm_->queries(q), k = qk_norm_->keys(k);
  q = q.transpose(1, 2);
  k = k.transpose(1, 2);
  auto v = v_proj_.forward(x, training).view({b, t, num_kv_heads_, head_dim_}).transpose(1, 2);
  q = apply_rope(q, cos, sin);
  k = apply_rope(k, cos, sin);
  auto o = attention(q, k, v, rope, scale_, window_);             // [B,H,T,D]
  o = o.transpose(1, 2).reshape({b, t, num_heads_ * head_dim_});  // [B,T,H*D]
  return out(o);
}

at::Tensor Mlp::forward(const at::Tensor& x, bool training) const { return forward_with(x, training, true); }

at::Tensor Mlp::forward_for_backward(const at::Tensor& x, bool training) const {
  return forward_with(x, training, /*down_values=*/false);
}

at::Tensor Mlp::forward_with(const at::Tensor& x, bool training, bool down_values) const {
  const auto* fused = fused_ops_for(x);
  // The ATen path runs up_proj first, as its old one-expression form did under GCC (right to
  // left): the order decides autograd's and so DDP's gradient order, the LoRA dropout draws and
  // the rounding of x's summed gradient, and CPU runs stay bit-identical to earlier commits
  // (scripts/fixtures/bitwise_runs.py). The fused path has always run gate_proj first.
  at::Tensor gate, up;
  if (gelu_tanh_) {  // Gemma's GeGLU, as transformers' Gemma3MLP: gate first
    gate = gate_proj_.forward(x, training);
    up = up_proj_.forward(x, training);
    const auto act = fused && fused->geglu ? fused->geglu(gate, up) : at::gelu(gate, "tanh") * up;
    return down_values ? down_proj_.forward(act, training) : down_proj_.forward_for_backward(act, training);
  }
  if (fused) {
    gate = gate_proj_.forward(x, training);
    up = up_proj_.forward(x, training);
  } else {
    up = up_proj_.forward(x, training);
    gate = gate_proj_.forward(x, training);
  }
  auto act = fused ? fused_swiglu(*fused, gate, up, *this, down_values, x.requires_grad()) : at::silu(gate) * up;
  return down_values ? down_proj_.forward(act, training) : down_proj_.forward_for_backward(act, training);
}

at::Tensor DecoderLayer::forward(const at::Tensor& x, const RopeTables& rope, bool training) const {
  return forward_keeping_mid(x, rope, training).first;
}

std::pair<at::Tensor, at::Tensor> DecoderLayer::forward_keeping_mid(const at::Tensor& x, const RopeTables& rope,
                                                                    bool training) const {
  if (attn_out_norm_) {  // sandwich norms (Gemma): each block's output normed before its residual add
    const auto h = x + attn_out_norm_->forward(self_attn_.forward(input_layernorm_.forward(x), rope, training));
    return {h + mlp_out_norm_->forward(mlp_->forward(post_attention_layernorm_.forward(h), training)), h};
  }
  at::Tensor h, n;
  if (const auto* fused = fused_ops_for(x)) {
    // The residual add and the next norm in one kernel: h = x + attn, n = norm(h).
    auto attn = self_attn_.forward(input_layernorm_.forward(x), rope, training);
    const auto& post = post_attention_layernorm_;
    std::tie(h, n) = fused->add_rms_norm(x, attn, as(post.weight_, x), post.eps_);
  } else {
    h = x + self_attn_.forward(input_layernorm_.forward(x), rope, training);
    n = post_attention_layernorm_.forward(h);
  }
  return {h + mlp_->forward(n, training), h};
}

at::Tensor DecoderLayer::attention_half_for_backward(const at::Tensor& x, const RopeTables& rope,
                                                     bool training) const {
  // The output norm's backward reads o_proj's output: the sandwich layer recomputes it whole.
  if (attn_out_norm_) return x + attn_out_norm_->forward(self_attn_.forward(input_layernorm_.forward(x), rope, training));
  return x + self_attn_.forward_for_backward(input_layernorm_.forward(x), rope, training);
}

// The fused add_rms_norm rounds h to the activation dtype before normalising it: norm(h) of the
// kept h is the forward's n, bit for bit.
at::Tensor DecoderLayer::mlp_half_for_backward(const at::Tensor& h, bool training) const {
  if (mlp_out_norm_) return h + mlp_out_norm_->forward(mlp_->forward(post_attention_layernorm_.forward(h), training));
  return h + mlp_->forward_for_backward(post_attention_layernorm_.forward(h), training);
}

bool DecoderLayer::draws_random(bool training) const {
  const auto& a = self_attn_;
  return a.q_proj_.draws_random(training) || a.k_proj_.draws_random(training) || a.v_proj_.draws_random(training) ||
         a.o_proj_.draws_random(training) || mlp_->draws_random(training);
}

bool Mlp::draws_random(bool training) const {
  return gate_proj_.draws_random(training) || up_proj_.draws_random(training) || down_proj_.draws_random(training);
}

void Attention::named_parameters(const std::string& prefix, std::vector<NamedParam>& out) {
  for (auto& [name, lin] : linears()) lin->named_parameters(prefix + name + ".", out);
  if (qk_norm_) qk_norm_->named_parameters(prefix, out);
}

std::vector<std::pair<std::string, Linear*>> Attention::linears() {
  return {{"q_proj", &q_proj_}, {"k_proj", &k_proj_}, {"v_proj", &v_proj_}, {"o_proj", &o_proj_}};
}

void Mlp::named_parameters(const std::string& prefix, std::vector<NamedParam>& out) {
  for (auto& [name, lin] : linears()) lin->named_parameters(prefix + name + ".", out);
}

std::vector<std::pair<std::string, Linear*>> Mlp::linears() {
  return {{"gate_proj", &gate_proj_}, {"up_proj", &up_proj_}, {"down_proj", &down_proj_}};
}

void DecoderLayer::named_parameters(const std::string& prefix, std::vector<NamedParam>& out) {
  out.push_back({prefix + "input_layernorm.weight", &input_layernorm_.weight_});
  self_attn_.named_parameters(prefix + "self_attn.", out);
  mlp_->named_parameters(prefix + "mlp.", out);
  if (attn_out_norm_) {  // Gemma's names: its post_attention_layernorm norms the attention's output
    out.push_back({prefix + "post_attention_layernorm.weight", &attn_out_norm_->weight_});
    out.push_back({prefix + "pre_feedforward_layernorm.weight", &post_attention_layernorm_.weight_});
    out.push_back({prefix + "post_feedforward_layernorm.weight", &mlp_out_norm_->weight_});
    return;
  }
  out.push_back({prefix + "post_attention_layernorm.weight", &post_attention_layernorm_.weight_});
}

std::vector<std::pair<std::string, Linear*>> DecoderLayer::linears() {
  auto out = self_attn_.linears();
  for (auto& l : mlp_->linears()) out.push_back(l);
  return out;
}

}  // namespace lf::model
