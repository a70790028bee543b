#pragma once
// The load-balancing auxiliary loss of a mixture-of-experts forward, as transformers'
// load_balancing_loss_func computes it over the router logits of every sparse layer:
//
//   aux = E · Σ_e f_e · P_e,  f_e = Σ_l Σ_n m_n·#(e ∈ top-k_ln) / (L·M),  P_e = Σ_l Σ_n m_n·p_lne / (L·M)
//
// with p_ln = softmax of layer l's router logits for token n, m_n the token's attention mask
// (1 real, 0 padding), M = Σ m, L the sparse layers, E the experts. It is a statistic of one
// forward (one micro-batch): HF's Trainer adds router_aux_loss_coef · aux to each micro-batch's loss.
//
// Since f carries no gradient, ∂aux/∂p_lne = E·f_e·m_n/(L·M): each layer's probabilities pass through
// an identity node (attach) whose backward adds grad_weight times that, with f read from every
// layer's counts when backward runs (after the whole forward). So the layers never hold the other
// layers' tensors, activation checkpointing recomputes a layer unchanged, and ZeRO-3 frees nothing
// early. A recomputed layer (its counts already recorded in this forward) records nothing again.
//
// Single device, not thread-safe: begin/attach/record from the forward (or a checkpoint's
// recompute); the node's backward reads the forward's counts on autograd's thread.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>

namespace lf::model {

class RouterAuxLoss {
 public:
  explicit RouterAuxLoss(int64_t sparse_layers = 0) : layers_(sparse_layers) {}
  int64_t sparse_layers() const { return layers_; }

  // Before a forward: which of its B·T tokens count (token_mask [B·T] 0/1 on the model's device;
  // undefined: every token), and the weight of the loss in the coming backward (router_aux_loss_coef
  // × the loss scale; 0: only measured). Until begin() is called the layers record nothing.
  void begin(const at::Tensor& token_mask, double grad_weight);
  // Stops recording (evaluation forwards, a rank's forward without targets).
  void end() { state_.reset(); }
  bool active() const { return state_ != nullptr; }

  // In sparse layer `layer`'s forward: probs [N, E] fp32, the softmax of its router logits. Returns
  // them through the node that adds grad_weight · ∂aux/∂probs in backward (themselves when inactive
  // or the weight is 0).
  at::Tensor attach(int64_t layer, const at::Tensor& probs) const;
  // Then its choice: chosen [N, k] expert indices, and the probabilities (no gradient needed).
  void record(int64_t layer, const at::Tensor& chosen, const at::Tensor& probs);

  // After the forward: aux as a 0-dim fp32 tensor on the device (no gradient); undefined when no
  // sparse layer recorded, or when no token counts (M = 0).
  at::Tensor value() const;

  struct State;  // router_aux_loss.cpp: the forward's mask, counts and probability sums

 private:
  int64_t layers_ = 0;
  std::shared_ptr<State> state_;  // this forward's; a node keeps its own forward's alive
};

}  // namespace lf::model
