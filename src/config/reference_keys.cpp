// LLaMA-Factory 0.9.5's reference-model keys (FinetuningArguments, read by create_ref_model) and the
// two DPO variants its CustomDPOTrainer adds over TRL's losses: the BCO term (pref_bco_weight, with
// TRL's RunningMoments baseline) and LD-DPO's length weighting (ld_alpha, in its get_batch_logps).
// Declared here, listed in config_schema.cpp; the rules against the stage are check_reference's
// (called by config_rules.cpp): where LLaMA-Factory would read the key and ignore it, lf-train stops.
#include "reference_keys.h"

#include "schema_builders.h"

namespace lf::config {

namespace {

using namespace schema;

// LLaMA-Factory asserts 4 or 8; 8 is LLM.int8(), which lf-train has no GEMM for (quantization_keys.cpp).
void check_ref_bits(const Reader& r, const std::string& key, const std::optional<int64_t>& bits) {
  if (!bits || *bits == 4) return;
  LF_CHECK(*bits != 8, ConfigError,
           "{}: `ref_model_quantization_bit: 8` (bitsandbytes' LLM.int8()) is not implemented: its int8 GEMM with "
           "fp16 outlier columns is another computation than the 4-bit storage lf-train dequantizes into its GEMMs; "
           "use `ref_model_quantization_bit: 4`, or remove it for an unquantized reference",
           r.where(key));
  LF_THROW(ConfigError, "{}: `ref_model_quantization_bit: {}`: only 4 or 8 are accepted (LLaMA-Factory's rule), and "
           "lf-train implements 4; set 4 or remove it", r.where(key), *bits);
}

}  // namespace

std::vector<KeyDecl> reference_keys() {
  const std::string dpo = "stage: dpo", with_ref = "stage: dpo\nref_model: ref_folder";
  return {
      implemented("ref_model", LF_FIELD(objective, ref_model),
                  "dpo (with a reference), kto: the reference model's folder instead of the policy's start; loaded "
                  "frozen in the compute dtype, its log-probabilities computed once before step 1, then freed")
          .sample("ref_folder", dpo)  // test_key_effects.py gives it a model folder
          .observe("losses"),
      implemented("ref_model_adapters", LF_FIELD(objective, ref_model_adapters),
                  "with ref_model: PEFT adapters merged into it in turn (peft's merge_and_unload)")
          .sample("adapter_folder", with_ref)
          .observe("losses"),
      implemented("ref_model_quantization_bit", LF_FIELD(objective, ref_model_quantization_bit),
                  "with ref_model: 4 loads the reference's decoder linear layers in bitsandbytes' 4-bit format "
                  "(quantization_type, double_quantization as for the policy); 8 (LLM.int8()) refused")
          .check(check_ref_bits)
          .sample("4", with_ref)
          .observe("losses"),
      implemented("pref_bco_weight", LF_FIELD(objective, pref_bco_weight),
                  "dpo with a reference: BCO's term, losses (dpo + w bco) / (1 + w), its reward baseline TRL's "
                  "RunningMoments over every micro-batch (every rank's) since the run started")
          .check(non_negative)
          .sample("0.5", dpo)
          .observe("losses"),
      implemented("ld_alpha", LF_FIELD(objective, ld_alpha),
                  "dpo: LD-DPO, the policy's log-probabilities of response tokens past the pair's shorter response "
                  "weighted by ld_alpha (the reference's are not)")
          .sample("0.5", dpo)
          .observe("losses"),
  };
}

void check_reference(const Reader& r, const JobPlan& c) {
  const auto& o = c.objective;
  LF_CHECK(o.ref_model.empty() || o.uses_reference(), ConfigError,
           "{}: stage {}{} compares with no reference model, so LLaMA-Factory would not load it: remove ref_model "
           "(dpo with pref_loss sigmoid, hinge or ipo, and kto, read it)",
           r.where("ref_model"), o.stage, o.stage == "dpo" ? " with pref_loss " + o.pref_loss : std::string());
  for (const char* key : {"ref_model_adapters", "ref_model_quantization_bit"})
    LF_CHECK(!r.has(key) || !o.ref_model.empty(), ConfigError,
             "{}: `{}` applies to the model ref_model names, and ref_model is not set (LLaMA-Factory would ignore "
             "it): set ref_model or remove {}", r.where(key), key, key);
  LF_CHECK(o.pref_bco_weight <= 1e-6 || (o.stage == "dpo" && o.uses_reference()), ConfigError,
           "{}: BCO's term is added to DPO's reference losses only (LLaMA-Factory's compute_preference_loss); stage {}"
           "{} would ignore it: remove pref_bco_weight",
           r.where("pref_bco_weight"), o.stage, o.stage == "dpo" ? " with pref_loss " + o.pref_loss : std::string());
  LF_CHECK(!o.ld_alpha || o.stage == "dpo", ConfigError,
           "{}: LD-DPO's length weighting is read by LLaMA-Factory's DPO trainer only; stage {} would ignore it: "
           "remove ld_alpha", r.where("ld_alpha"), o.stage);
}

}  // namespace lf::config
