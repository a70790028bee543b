#pragma once
// ref_model (LLaMA-Factory's create_ref_model): the preference stages' reference when it is not the
// policy's start. Loaded frozen on the policy's device in the compute dtype (LLaMA-Factory's
// load_model(is_trainable=False) keeps it there: no fp32 master copy), ref_model_adapters merged into
// it in turn (peft's merge_and_unload), its decoder linear layers in bitsandbytes' 4 bits with
// ref_model_quantization_bit 4 (the policy's quantization_type and double_quantization). The caller
// computes its log-probabilities once (reference_logps.h) and frees it before step 1, so training
// holds no second model. Each rank loads it whole (no ZeRO-3 sharding of the reference: it lives only
// for the reference pass, before the optimizer states exist). Internal to lf_train.
#include <memory>

#include "objective.h"

namespace lf::train {

// The model the plan's objective.ref_model names; ConfigError on a vocabulary smaller than the policy's
// (the data's token ids would index outside its embedding).
std::unique_ptr<model::CausalLM> load_reference_model(const config::JobPlan& plan, const model::CausalLM& policy);

// The objective's separate reference: the plan's ref_model loaded (dropout off, as TRL's
// disable_dropout_in_model(ref_model)), or null when the reference is the policy's start.
std::unique_ptr<model::CausalLM> separate_reference(const ObjectiveContext& ctx);

}  // namespace lf::train
