// LLaMA-Factory's quantization keys (QLoRA), as its ModelArguments and configure_quantization read
// them: quantization_bit 4 with quantization_method bnb quantizes the base at load in bitsandbytes'
// 4-bit format (quantization_type, double_quantization), the compute dtype from bf16 / fp16.
// Declared here, listed in config_schema.cpp; the rules between them and other keys are
// check_quantization's (below, called by config_rules.cpp).
#include "quantization_keys.h"

#include "schema_builders.h"

namespace lf::config {

namespace {

using namespace schema;

constexpr const char* kContext = "finetuning_type: lora";
constexpr const char* kQuantContext = "finetuning_type: lora\nquantization_bit: 4";

// 8 bits is LLM.int8(): a different GEMM (int8 with fp16 outlier columns), not a storage of the same
// weights; the other values bitsandbytes has no format for.
void check_bits(const Reader& r, const std::string& key, const std::optional<int64_t>& bits) {
  if (!bits || *bits == 4) return;
  LF_CHECK(*bits != 8, ConfigError,
           "{}: `quantization_bit: 8` (bitsandbytes' LLM.int8()) is not implemented: its int8 GEMM with fp16 outlier "
           "columns is another computation than the 4-bit storage lf-train dequantizes into its GEMMs; use "
           "`quantization_bit: 4` (QLoRA, NF4), or train the unquantized base with LoRA",
           r.where(key));
  LF_THROW(ConfigError,
           "{}: `quantization_bit: {}`: bitsandbytes only accepts 4-bit or 8-bit quantization (LLaMA-Factory's rule), "
           "and lf-train implements 4; set `quantization_bit: 4` or remove it",
           r.where(key), *bits);
}

}  // namespace

std::vector<KeyDecl> quantization_keys() {
  KeyDecl method;
  method.name = "quantization_method";
  method.policy = KeyPolicy::kOnlyValues;
  method.type = "text";
  method.choices = {"bnb"};
  method.note =
      "bnb: bitsandbytes' format, quantized at load (with quantization_bit). gptq, awq, aqlm (pre-quantized "
      "folders), hqq and eetq are not implemented: each is another storage and GEMM; a GPTQ / AWQ folder is the "
      "natural next format";
  method.check = [](const Reader& r, const JobPlan&) {
    if (!r.has("quantization_method")) return;
    check_choice(r, "quantization_method", r.text("quantization_method"), {"bnb"},
                 "gptq, awq, aqlm, hqq and eetq are other storages and GEMMs, not implemented: use "
                 "`quantization_method: bnb` with `quantization_bit: 4`, or a bf16 base");
  };
  KeyDecl device_map;
  device_map.name = "quantization_device_map";
  device_map.policy = KeyPolicy::kRefused;
  device_map.note = "a device map is for inference: LLaMA-Factory refuses it in training (\"Cannot use device map for "
                    "quantized models in training\"); remove it";
  return {
      implemented("quantization_bit", LF_FIELD(precision, quantization_bit),
                  "4: QLoRA, the base's decoder linear layers stored in bitsandbytes' 4-bit format (quantized at "
                  "load, in the compute dtype) and dequantized into each GEMM; LoRA only. 8 (LLM.int8()) is refused "
                  "with the reason")
          .check(check_bits)
          .sample("4", kContext)
          .observe("losses"),
      std::move(method),
      implemented("quantization_type", LF_FIELD(precision, quantization_type),
                  "the 4-bit code: nf4 (normal quantiles) or fp4, as bitsandbytes")
          .choices({"nf4", "fp4"})
          .sample("fp4", kQuantContext)
          .observe("losses"),
      implemented("double_quantization", LF_FIELD(precision, double_quantization),
                  "the absmax of each block of 64 quantized again to 8 bits in blocks of 256 (4.127 bits a weight "
                  "instead of 4.5), as bitsandbytes")
          .sample("false", kQuantContext)
          .observe("log:4-bit base"),
      std::move(device_map),
  };
}

void check_quantization(const Reader& r, const JobPlan& c) {
  if (!c.precision.quantized()) return;
  const auto where = r.where("quantization_bit");
  // LLaMA-Factory's _check_extra_dependencies / get_train_args rules, in its words.
  LF_CHECK(c.adapter.peft(), ConfigError,
           "{}: quantization is only compatible with the LoRA or OFT method (LLaMA-Factory's rule): the quantized base "
           "is frozen; finetuning_type is {}: set `finetuning_type: lora`, or remove quantization_bit to train {}",
           where, c.adapter.finetuning_type, c.adapter.full() ? "every weight" : "the chosen layers");
  LF_CHECK(c.adapter.adapter_name_or_path.size() <= 1, ConfigError,
           "{}: a quantized model only accepts a single adapter (LLaMA-Factory's rule); {} given: merge them first "
           "(lf-train export, into the unquantized base)",
           where, c.adapter.adapter_name_or_path.size());
  LF_CHECK(c.adapter.adapter_name_or_path.empty() || !c.adapter.create_new_adapter, ConfigError,
           "{}: cannot create a new adapter upon a quantized model (LLaMA-Factory's rule): remove create_new_adapter "
           "to train the given adapter further",
           where);
  LF_CHECK(!c.adapter.use_dora, ConfigError,
           "{}: DoRA over a 4-bit base is not implemented yet (its weight norm needs the dequantized weight each "
           "step); use LoRA (use_dora: false) with quantization_bit, or DoRA on a bf16 base",
           where);
  LF_CHECK(c.adapter.additional_target.empty(), ConfigError,
           "{}: additional_target beside a 4-bit base is not implemented yet; remove it", where);
}

}  // namespace lf::config
