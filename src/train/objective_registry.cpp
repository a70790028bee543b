// The objective of each stage (objective.h): one line per stage.
#include "lf/common/error.h"
#include "objective.h"

namespace lf::train {

std::unique_ptr<Objective> make_dpo_objective(const ObjectiveContext& ctx);  // dpo_objective.cpp
std::unique_ptr<Objective> make_kto_objective(const ObjectiveContext& ctx);  // kto_objective.cpp
std::unique_ptr<Objective> make_rm_objective(const ObjectiveContext& ctx);   // rm_objective.cpp
std::unique_ptr<Objective> make_token_weighted_objective(const ObjectiveContext& ctx);  // token_weighted_objective.cpp
std::unique_ptr<Objective> make_asft_objective(const ObjectiveContext& ctx);  // asft_objective.cpp

std::unique_ptr<Objective> make_preference_objective(const ObjectiveContext& ctx) {
  const auto& stage = ctx.plan->objective.stage;
  if (stage == "dpo") return make_dpo_objective(ctx);
  if (stage == "kto") return make_kto_objective(ctx);
  if (stage == "rm") return make_rm_objective(ctx);
  if (stage == "sft" && (ctx.plan->objective.use_dft_loss || ctx.plan->objective.use_eaft_loss))
    return make_token_weighted_objective(ctx);  // DFT, EAFT
  if (stage == "sft" && ctx.plan->objective.use_asft_loss) return make_asft_objective(ctx);
  return nullptr;  // sft, pt: the trainer's LM objective (lm_objective.cpp)
}

}  // namespace lf::train
