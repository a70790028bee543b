#include "lf/train/router_loss_coef.h"

#include "lf/common/error.h"
#include "lf/common/log.h"
#include "lf/config/job_plan.h"
#include "lf/model/causal_lm.h"

namespace lf::train {

double router_aux_loss_coef(const config::JobPlan& plan, const model::CausalLM& m) {
  const auto& set = plan.model.moe_aux_loss_coef;
  const auto& moe = m.config().moe;
  if (m.layout().moe_layers == 0) {
    if (set && *set > 0)
      spdlog::warn("moe_aux_loss_coef: {} has no mixture-of-experts layer; no effect (as in LLaMA-Factory)",
                   m.config().architecture_name);
    return 0;
  }
  // LLaMA-Factory's configure_moe: a coefficient of 0 leaves the config as it is.
  const double coef = set && *set > 0 ? *set : moe.output_router_logits ? moe.router_aux_loss_coef : 0.0;
  LF_CHECK(coef == 0 || plan.objective.stage == "sft" || plan.objective.stage == "pt", ConfigError,
           "stage {} with the mixture-of-experts load-balancing loss (moe_aux_loss_coef {}) is not implemented "
           "(TRL adds it to the preference losses); unset moe_aux_loss_coef, or train this stage without it",
           plan.objective.stage, coef);
  LF_CHECK(coef == 0 || !plan.data.neat_packing, ConfigError,
           "neat_packing with the mixture-of-experts load-balancing loss (moe_aux_loss_coef {}) is not supported: "
           "LLaMA-Factory hands transformers' aux loss a packed attention mask it does not read as one (the loss "
           "would differ); unset moe_aux_loss_coef or use packing: true",
           coef);
  spdlog::info("mixture of experts: {} sparse layers of {}; load-balancing loss {}", m.layout().moe_layers,
               m.num_layers(), coef > 0 ? fmt::format("x {} in the training loss", coef) : std::string("off"));
  return coef;
}

bool router_aux_loss_trains(const config::JobPlan& plan, double coef) {
  if (coef == 0 || !plan.model.gradient_checkpointing || !plan.model.use_reentrant_gc) return true;
  spdlog::warn("moe_aux_loss_coef with gradient checkpointing and use_reentrant_gc: true (LLaMA-Factory's default): "
               "transformers records the routers' logits in the reentrant checkpoint's no-grad forward, so the "
               "load-balancing loss is logged but adds no gradient; lf-train does the same. Set use_reentrant_gc: "
               "false (or disable_gradient_checkpointing: true) for it to train the routers");
  return false;
}

}  // namespace lf::train
