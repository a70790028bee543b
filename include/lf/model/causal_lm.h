#pragma once
// A decoder-only causal LM as plain tensors (see layers.h for the contract), built from its
// family's layout (model_layout.h: every parameter's name, shape and unit, each layer's
// composition), which the modules are checked against at construction.
//
//   logits = head(run layers over embed(ids))
// forward() does all of it; hidden_states() runs the embedding and the layers (with
// activation checkpointing and a strategy's unit hooks, unit_hooks.h) and final_norm() /
// lm_head_weight() let a trainer put a chunked loss after them: the trainer's one forward
// path is hidden_states() + its head unit.
// Single device, not thread-safe.
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <memory>
#include <optional>
#include <vector>

#include "lf/model/config.h"
#include "lf/model/grad_sink.h"
#include "lf/model/layers.h"
#include "lf/model/model_layout.h"
#include "lf/model/router_aux_loss.h"
#include "lf/model/unit_hooks.h"

namespace lf::model {

// A linear module LoRA may adapt, with its layout entry (module name, layer, unit).
struct ModelLinear {
  const LinearSpec* spec;
  Linear* linear;
};

class CausalLM {
 public:
  // Allocates every parameter uninitialised with `options` (dtype + device); use
  // init_random() or load weights (loader.h) before running it.
  CausalLM(ModelConfig config, const at::TensorOptions& options);

  const ModelConfig& config() const { return config_; }
  const ModelLayout& layout() const { return layout_; }
  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }
  std::vector<DecoderLayer>& layers() { return layers_; }
  const std::vector<DecoderLayer>& layers() const { return layers_; }

  // Activations dtype (kBFloat16 for mixed precision over fp32 parameters). Default:
  // the parameters' dtype.
  void set_compute_dtype(c10::ScalarType dtype) { compute_dtype_ = dtype; }
  c10::ScalarType compute_dtype() const { return compute_dtype_; }
  void set_training(bool training) { training_ = training; }
  bool training() const { return training_; }
  // forward() wraps each decoder layer in checkpointed_layer_forward (checkpointing.h)
  // while autograd is on: activation memory of one layer instead of all of them.
  void set_gradient_checkpointing(bool on) { gradient_checkpointing_ = on; }
  // For a loss that holds lm_head's gradient: its weight's route (grad_sink.h), unless lm_head
  // is the tied embedding whose last lookup gave its gradient to autograd (both parts must
  // take the same path).
  GradSink* lm_head_grad_sink() const {
    return !config_.tie_word_embeddings || embed_rows_to_sink_ ? grad_route(lm_head_weight()) : nullptr;
  }
  bool gradient_checkpointing() const { return gradient_checkpointing_; }
  // finetuning_type freeze (freeze.h): only the base parameters requiring grad train.
  void set_partly_frozen(bool on) { partly_frozen_ = on; }
  bool partly_frozen() const { return partly_frozen_; }

  at::Tensor embed(const at::Tensor& input_ids) const;  // [B,T] int64 -> [B,T,C]
  // position_ids [B,T] or undefined for 0..T-1. They only move RoPE: attention stays
  // causal over the whole row unless segment_ids [B,T] (neat_packing: the sequence of each
  // token, 0 for padding) restrict it to each packed sequence: on a GPU through the varlen
  // kernel (their offsets read on the host: pass segment_ids there), else a mask.
  RopeTables rope(int64_t seq_len, const at::Tensor& position_ids = {}, const at::Tensor& segment_ids = {}) const;
  at::Tensor head(const at::Tensor& hidden) const;  // final norm + lm_head: [B,T,C] -> [B,T,V]
  at::Tensor final_norm(const at::Tensor& hidden) const;
  const at::Tensor& lm_head_weight() const { return config_.tie_word_embeddings ? embed_tokens_ : lm_head_; }
  at::Tensor forward(const at::Tensor& input_ids, const at::Tensor& position_ids = {},
                     const at::Tensor& segment_ids = {}) const;  // [B,T,V]
  // The last decoder layer's output [B,T,C] (before the final norm): feed it to
  // causal_lm_loss_fused (fused_loss.h) to never materialise [B,T,V] logits. The embedding is
  // unit 0 and layer i unit i+1 of `hooks` (unit_hooks.h; null: none).
  at::Tensor hidden_states(const at::Tensor& input_ids, const at::Tensor& position_ids = {},
                           UnitHooks* hooks = nullptr, const at::Tensor& segment_ids = {}) const;
  // The head's unit index (final norm + lm_head) for a strategy's hooks.
  int64_t head_unit() const { return layout_.head_unit(); }
  // The load-balancing loss of the mixture-of-experts layers (router_aux_loss.h): begin() it before
  // a forward whose loss it joins, read value() after. No sparse layer: sparse_layers() == 0.
  RouterAuxLoss& router_aux_loss() const { return *router_aux_; }

  // Every parameter with its layout name ("model.layers.0.self_attn.q_proj.weight") and unit, in
  // the layout's order; a tied lm_head is not listed. LoRA weights are not listed here (lora.h).
  std::vector<NamedParam> named_parameters();
  // Moves every tensor of the model to `device` (a model built on the host, its linear layers
  // quantized onto the device first: bnb4_linear.h).
  void to(const c10::Device& device);
  // The decoder layers' linear modules, in the layout's order (layout().linears).
  std::vector<ModelLinear> linears();
  // HF initialisation: normal(0, initializer_range) for linear/embedding weights,
  // zero biases, unit norm weights. Deterministic for a seed on one device type.
  void init_random(uint64_t seed);

 private:
  std::vector<NamedParam> module_parameters();  // the modules' own names below their unit
  void check_layout();
  ModelConfig config_;
  ModelLayout layout_;
  c10::ScalarType compute_dtype_;
  bool training_ = false;
  bool gradient_checkpointing_ = false;
  bool partly_frozen_ = false;
  mutable bool embed_rows_to_sink_ = false;  // the last embed() gave its rows to its route
  at::Tensor embed_tokens_;  // [V,C]
  std::vector<DecoderLayer> layers_;
  RmsNorm norm_;
  at::Tensor lm_head_;  // [V,C]; undefined when tied
  at::Tensor inv_freq_;  // [D/2] fp32, on the parameters' device
  at::Tensor local_inv_freq_;  // the sliding layers' (config.local_rope), or undefined
  std::unique_ptr<RouterAuxLoss> router_aux_;  // the MoE layers hold its address
};

// The RoPE inverse frequencies, [head_dim/2] fp32, with the scaling of `rope` (the config's, or its
// sliding layers' local_rope: linear, yarn, llama3; dynamic: the default ones within
// max_position_embeddings) applied, and the factor yarn scales cos and sin by (1 for the others).
at::Tensor rope_inv_freq(const ModelConfig& config);
at::Tensor rope_inv_freq(const ModelConfig& config, const RopeConfig& rope);
double rope_attention_scaling(const RopeConfig& rope);

}  // namespace lf::model
