#pragma once
// Whether a training run adds the mixture-of-experts load-balancing loss (lf/model/router_aux_loss.h),
// and with which weight. Torch-free.
namespace lf::model {
class CausalLM;
}
namespace lf::config {
struct JobPlan;
}

namespace lf::train {

// Mixture of experts: the load-balancing loss's weight in training (moe_aux_loss_coef, else the
// config.json's router_aux_loss_coef under output_router_logits, as transformers and LLaMA-Factory);
// 0 for a dense model (a warning when moe_aux_loss_coef is set) and when off. neat_packing with it on
// is refused (LLaMA-Factory's packed attention mask is not one transformers' aux loss reads).
double router_aux_loss_coef(const config::JobPlan& plan, const model::CausalLM& m);

// Whether the load-balancing loss has a gradient (weight coef) or is only logged: LLaMA-Factory's
// reentrant activation checkpointing (use_reentrant_gc, its default) records transformers' router
// logits in the no-grad forward, so there the loss trains nothing; said in one warning.
bool router_aux_loss_trains(const config::JobPlan& plan, double coef);

}  // namespace lf::train
