#pragma once
// A mixture-of-experts MLP (model_layout.h's MlpKind::kMoe), as transformers' Qwen3-MoE,
// Qwen2-MoE and Mixtral sparse blocks compute it:
//
//   logits = x · gate^T                       [N, E] (compute dtype)
//   p = softmax(logits) in fp32; the top-k of p (renormalised to sum 1 when norm_topk_prob),
//   cast to the compute dtype, weight the k chosen experts' outputs (moe_experts.h)
//   + shared_expert(x) · sigmoid(shared_expert_gate(x))   (Qwen2-MoE)
//
// The router's probabilities pass through the model's RouterAuxLoss (router_aux_loss.h), which
// counts this layer's choices and adds the load-balancing loss's gradient in backward.
// Single device, not thread-safe.
#include <ATen/core/Tensor.h>

#include <memory>

#include "lf/model/expert_dispatch.h"
#include "lf/model/layers.h"
#include "lf/model/model_layout.h"
#include "lf/model/router_aux_loss.h"

namespace lf::model {

struct MoeBlock final : FeedForward {
  MoeSpec spec;
  at::Tensor gate_;      // [E, C]: the router
  at::Tensor gate_up_;   // [E, 2I, C]
  at::Tensor down_;      // [E, C, I]
  std::unique_ptr<Mlp> shared_expert_;         // Qwen2-MoE (its linears LoRA may adapt)
  std::unique_ptr<Linear> shared_expert_gate_; // [1, C]
  RouterAuxLoss* aux_ = nullptr;               // the model's; null: nothing recorded
  // Expert parallelism (expert_dispatch.h): gate_up_ / down_ then hold this rank's experts only
  // and the dispatch runs them; null: every expert here, routed_experts on this device.
  ExpertDispatch* dispatch_ = nullptr;

  at::Tensor forward(const at::Tensor& x, bool training) const override;
  // The experts' output is one node (no separate output projection to leave unwritten).
  at::Tensor forward_for_backward(const at::Tensor& x, bool training) const override { return forward(x, training); }
  // gate.weight, experts.gate_up_proj, experts.down_proj, then the shared expert's and its gate's.
  void named_parameters(const std::string& prefix, std::vector<NamedParam>& out) override;
  std::vector<std::pair<std::string, Linear*>> linears() override;  // shared_expert.*, shared_expert_gate
  bool draws_random(bool training) const override;
};

}  // namespace lf::model
