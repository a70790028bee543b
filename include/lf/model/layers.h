#pragma once
// The building blocks of decoder layers as plain tensors (no nn::Module), built from a family's
// LayerSpec (layer_builder.h):
// DDP/ZeRO wrappers reach every parameter through named_parameters() pointers and
// may replace or re-point them, and route their gradients from outside (grad_sink.h);
// activation checkpointing wraps DecoderLayer::forward.
//
// Mixed precision is autocast-like: parameters keep their storage dtype (fp32 master
// or bf16), each op casts its weight to the activation dtype. Norms compute in fp32.
// Shapes: B batch, T sequence, C hidden, H heads, K kv heads, D head_dim.
// Not thread-safe; single device.
#include <ATen/core/Tensor.h>

#include "lf/model/linear_format.h"
#include "lf/model/oft.h"
#include "lf/quant/fp8.h"
#include "lf/model/varlen_attention.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace lf::kernels {
struct FusedOps;
}  // namespace lf::kernels

namespace lf::model {

// A parameter by its name (HF's, or peft's for an adapter); the pointer stays valid while the
// model lives. CausalLM's carry their ZeRO unit (model_layout.h's ParamSpec::unit).
struct NamedParam {
  std::string name;
  at::Tensor* tensor;
  int64_t unit = -1;  // -1: not from a model (a layer's own list)
};

// LoRA's low-rank update of one Linear: y += dropout(x) A^T B^T * scaling. With a magnitude
// (DoRA, use_dora: dora.cpp), peft's weight-decomposed form instead.
struct LoraWeights {
  at::Tensor a_;  // [r, in]
  at::Tensor b_;  // [out, r]
  at::Tensor magnitude_;  // [out] fp32, DoRA only (undefined: plain LoRA)
  double scaling_ = 1.0;
  double dropout_ = 0.0;
};

struct Linear {
  at::Tensor weight_;  // [out, in]; undefined when format_ holds the weight
  at::Tensor bias_;    // [out] or undefined
  std::unique_ptr<LoraWeights> lora_;
  std::unique_ptr<OftWeights> oft_;  // OFT's rotation of the input (finetuning_type oft: oft.h), or null
  // The frozen weight in a number format of its own (QLoRA's 4 bits: linear_format.h), or null.
  std::unique_ptr<LinearFormat> format_;
  // A trainable weight's GEMMs in FP8 under this recipe (fp8_linear.h; kNone: the compute dtype's).
  quant::Fp8Recipe fp8_ = quant::Fp8Recipe::kNone;

  int64_t out_features() const { return format_ ? format_->out_features() : weight_.size(0); }
  int64_t in_features() const { return format_ ? format_->in_features() : weight_.size(1); }

  at::Tensor forward(const at::Tensor& x, bool training) const;  // [.., in] -> [.., out]
  // forward's autograd graph with the base GEMM's output left unwritten (backward_only_linear.h):
  // for a checkpoint recompute that only back-propagates through this use. DoRA runs forward
  // (its magnitude's gradient reads the base output).
  at::Tensor forward_for_backward(const at::Tensor& x, bool training) const;
  void named_parameters(const std::string& prefix, std::vector<NamedParam>& out);
  bool draws_random(bool training) const { return training && lora_ && lora_->dropout_ > 0; }  // LoRA dropout

 private:
  at::Tensor forward_with(const at::Tensor& x, bool training, bool base_values) const;
  at::Tensor add_lora_accumulated(const at::Tensor& y, const at::Tensor& x, bool training) const;  // the fused path's LoRA
  at::Tensor add_lora(const at::Tensor& y, const at::Tensor& x, bool training, bool fused) const;  // y + LoRA(x)
  at::Tensor forward_dora(const at::Tensor& x, bool training) const;              // dora.cpp
  at::Tensor forward_oft(const at::Tensor& x, bool base_values) const;             // oft.cpp
};

struct RmsNorm {
  at::Tensor weight_;  // [C]
  double eps_ = 1e-6;
  bool one_plus_ = false;  // Gemma: (x̂ · (1 + w)) in fp32, rounded once (NormKind::kRmsOnePlus)
  at::Tensor forward(const at::Tensor& x) const;  // fp32 inside, result in x's dtype
};

// cos/sin tables of RoPE for the positions of one forward, already in compute dtype, and
// the attention mask of packed rows (neat_packing; packed_attention.h).
struct RopeTables {
  at::Tensor cos;  // [T, D] or [B, 1, T, D]
  at::Tensor sin;
  at::Tensor attn_mask;  // [B, 1, T, T] bool (true: attend), or undefined: causal over the row
  VarlenSegments varlen;  // neat_packing on a GPU instead of attn_mask (varlen_attention.h)
  at::Tensor local_cos, local_sin;  // the sliding layers' own RoPE (Gemma 3), or undefined
};

// Qwen3's per-head RMSNorm of queries and keys ([.., H, D] over D), before RoPE (qwen3_layers.cpp).
struct QkNorm {
  RmsNorm q_norm_, k_norm_;  // weights [D]
  at::Tensor queries(const at::Tensor& q) const;  // [B,T,H,D]
  at::Tensor keys(const at::Tensor& k) const;     // [B,T,K,D]
  // The fused path: `norm` over each D-wide head of the 2-D projection p [B*T, H*D] -> [B*T, H*D]
  // (not a view: the fused RoPE rotates it in place). fuses(x): the fused ops have it for x.
  bool fuses(const at::Tensor& x) const;
  at::Tensor fused_heads(const at::Tensor& p, const RmsNorm& norm, const kernels::FusedOps& fused) const;
  // "self_attn.q_norm.weight", "self_attn.k_norm.weight" below `prefix` ("model.layers.3.self_attn.").
  void named_parameters(const std::string& prefix, std::vector<NamedParam>& out);
};

struct Attention {
  Linear q_proj_, k_proj_, v_proj_, o_proj_;
  std::unique_ptr<QkNorm> qk_norm_;  // AttentionSpec::qk_norm (Qwen3)
  int64_t num_heads_ = 0, num_kv_heads_ = 0, head_dim_ = 0;
  double scale_ = 0;        // the scores' scale; 0: 1/sqrt(D)
  int64_t window_ = 0;      // > 0: a sliding-window layer (keys i - window < j <= i)
  bool local_rope_ = false; // RopeTables' local tables (Gemma 3's sliding layers)
  at::Tensor forward(const at::Tensor& x, const RopeTables& rope, bool training) const;  // [B,T,C]
  // The same graph with o_proj's output unwritten (Linear::forward_for_backward).
  at::Tensor forward_for_backward(const at::Tensor& x, const RopeTables& rope, bool training) const;
  // q, k, v, o (weight, bias), then the q/k norms, below `prefix` ("self_attn.").
  void named_parameters(const std::string& prefix, std::vector<NamedParam>& out);
  std::vector<std::pair<std::string, Linear*>> linears();  // q_proj, k_proj, v_proj, o_proj

 private:
  at::Tensor forward_with(const at::Tensor& x, const RopeTables& rope, bool training, bool o_values) const;
};

// A decoder layer's feed-forward block, the family's choice (MlpSpec; layer_builder.cpp builds it).
struct FeedForward {
  virtual ~FeedForward() = default;
  virtual at::Tensor forward(const at::Tensor& x, bool training) const = 0;  // [B,T,C] -> [B,T,C]
  // forward's graph with its output projection's output unwritten (Linear::forward_for_backward):
  // the lean checkpoint recompute's, which only back-propagates through it.
  virtual at::Tensor forward_for_backward(const at::Tensor& x, bool training) const = 0;
  // Its parameters below `prefix` ("mlp."), in the layout's order (model_layout.cpp).
  virtual void named_parameters(const std::string& prefix, std::vector<NamedParam>& out) = 0;
  // The Linear modules LoRA may adapt, by their names below the block ("gate_proj").
  virtual std::vector<std::pair<std::string, Linear*>> linears() = 0;
  // Whether forward(.., training) draws from the random generator (DecoderLayer::draws_random).
  virtual bool draws_random(bool training) const = 0;
};

// MlpKind::kSwiGlu: down(act(gate(x)) * up(x)), act SiLU (or Gemma's GELU-tanh).
struct Mlp final : FeedForward {
  Linear gate_proj_, up_proj_, down_proj_;
  bool gelu_tanh_ = false;  // MlpActivation::kGeluTanh
  at::Tensor forward(const at::Tensor& x, bool training) const override;
  at::Tensor forward_for_backward(const at::Tensor& x, bool training) const override;
  void named_parameters(const std::string& prefix, std::vector<NamedParam>& out) override;
  std::vector<std::pair<std::string, Linear*>> linears() override;
  bool draws_random(bool training) const override;

 private:
  at::Tensor forward_with(const at::Tensor& x, bool training, bool down_values) const;
};

// One pre-norm decoder layer; the unit activation checkpointing and ZeRO-3 wrap.
struct DecoderLayer {
  RmsNorm input_layernorm_;
  Attention self_attn_;
  RmsNorm post_attention_layernorm_;  // the MLP's input norm (Gemma's pre_feedforward_layernorm)
  std::unique_ptr<FeedForward> mlp_;
  // Sandwich norms (LayerSpec::sandwich_norms, Gemma): on the attention's output (Gemma's
  // post_attention_layernorm) and on the MLP's (post_feedforward_layernorm); null otherwise.
  std::unique_ptr<RmsNorm> attn_out_norm_, mlp_out_norm_;

  at::Tensor forward(const at::Tensor& x, const RopeTables& rope, bool training) const;  // [B,T,C]
  // Activation checkpointing's lean recompute (checkpointing.cpp) splits the layer at its
  // residual midpoint h = x + attn(norm1(x)), which the checkpointed forward keeps beside x:
  // forward_keeping_mid returns {forward's output, h}. The two halves' recomputes are forward's
  // autograd graph with values left garbage where backward does not read them: o_proj's and
  // down_proj's outputs (Linear::forward_for_backward), so h - x and the layer's output too.
  // Only for back-propagating a gradient given from outside.
  std::pair<at::Tensor, at::Tensor> forward_keeping_mid(const at::Tensor& x, const RopeTables& rope,
                                                        bool training) const;
  at::Tensor attention_half_for_backward(const at::Tensor& x, const RopeTables& rope, bool training) const;  // -> h
  at::Tensor mlp_half_for_backward(const at::Tensor& h, bool training) const;  // h -> output
  // Whether forward(.., training) draws from the random generator (LoRA dropout): activation
  // checkpointing saves and restores the generator only then (a CUDA graph cannot capture that).
  bool draws_random(bool training) const;
  // HF names below `prefix` ("model.layers.3."), in the layout's order (model_layout.cpp).
  void named_parameters(const std::string& prefix, std::vector<NamedParam>& out);
  // The layer's Linear modules by their names below their block (q_proj, ..., down_proj).
  std::vector<std::pair<std::string, Linear*>> linears();
};

}  // namespace lf::model
