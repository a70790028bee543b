#include "reference_model.h"

#include "lf/common/error.h"
#include "lf/common/log.h"
#include "lf/model/bnb4_linear.h"
#include "lf/model/causal_lm.h"
#include "lf/model/loader.h"
#include "lf/model/lora.h"
#include "sequence_logps.h"

namespace lf::train {

std::unique_ptr<model::CausalLM> load_reference_model(const config::JobPlan& plan, const model::CausalLM& policy) {
  const auto& o = plan.objective;
  model::LoadOptions lo;
  lo.device = policy.lm_head_weight().device();
  lo.param_dtype = policy.compute_dtype();
  lo.seed = static_cast<uint64_t>(plan.seed);
  if (o.ref_model_quantization_bit) {
    config::PrecisionSection p = plan.precision;
    p.quantization_bit = *o.ref_model_quantization_bit;
    p.quantization_method = "bnb";
    lo.quantize = model::bnb4_spec_of(p);
  }
  auto ref = model::load_causal_lm(o.ref_model, lo);
  ref->set_compute_dtype(policy.compute_dtype());
  LF_CHECK(ref->config().vocab_size >= policy.config().vocab_size, ConfigError,
           "ref_model {} has vocab_size {} but the policy {} has {}: the data's token ids would index outside the "
           "reference's embedding; use a reference with the policy's tokenizer",
           o.ref_model, ref->config().vocab_size, plan.model.model_name_or_path, policy.config().vocab_size);
  // LLaMA-Factory's init_adapter for a model that does not train: every adapter merged in turn, except over
  // a quantized base (not mergeable), which takes one adapter and runs it unmerged.
  if (o.ref_model_quantization_bit) {
    LF_CHECK(o.ref_model_adapters.size() <= 1, ConfigError,
             "ref_model_adapters: a quantized model only accepts a single adapter (LLaMA-Factory's rule), {} given "
             "with ref_model_quantization_bit: merge them first (lf-train export) or remove the quantization",
             o.ref_model_adapters.size());
    if (!o.ref_model_adapters.empty()) (void)model::load_lora_adapter(*ref, o.ref_model_adapters[0]);
  } else {
    for (const auto& a : o.ref_model_adapters) model::merge_lora_adapter(*ref, a);
  }
  for (auto& p : ref->named_parameters()) p.tensor->set_requires_grad(false);
  ref->set_training(false);
  spdlog::info("reference model: {}{}{}, {} on {}", o.ref_model,
               o.ref_model_adapters.empty() ? ""
                                            : fmt::format(" with {} adapter(s) merged", o.ref_model_adapters.size()),
               o.ref_model_quantization_bit ? ", decoder linears in 4 bits" : "", c10::toString(lo.param_dtype),
               lo.device.str());
  return ref;
}

std::unique_ptr<model::CausalLM> separate_reference(const ObjectiveContext& ctx) {
  if (ctx.plan->objective.ref_model.empty()) return nullptr;
  auto ref = load_reference_model(*ctx.plan, *ctx.model);
  disable_dropout(*ref);
  return ref;
}

}  // namespace lf::train
