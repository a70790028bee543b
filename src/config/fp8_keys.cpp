// LLaMA-Factory 0.9.5's FP8 keys (TrainingArguments fp8, fp8_backend, fp8_enable_fsdp_float8_all_gather;
// llamafactory/train/fp8_utils.py) and lf-train's recipe key. LLaMA-Factory hands FP8 to accelerate:
// backend auto / torchao is torchao's Float8Linear with the rowwise recipe over every linear layer but
// embed / lm_head / output / classifier and those with a dimension not divisible by 16; te is Transformer
// Engine's delayed scaling. lf-train has one FP8 backend of its own (torchao's arithmetic, lf/quant/fp8.h)
// for all three values. The hardware rule (an sm_89+ GPU; the CPU and older GPUs refused, never a
// fallback to bf16: LLaMA-Factory #9500) is the worker's (train/run_training.cpp): the plan has no GPU.
#include "fp8_keys.h"

#include "schema_builders.h"

namespace lf::config {

namespace {

using namespace schema;

// LLaMA-Factory's parser rule, in its words.
void check_fp8(const Reader& r, const JobPlan& c) {
  if (!c.precision.fp8) return;
  LF_CHECK(!c.precision.quantized(), ConfigError,
           "{}: FP8 training is not compatible with quantization (LLaMA-Factory's rule): the 4-bit base has its own "
           "GEMM; remove quantization_bit (LoRA's base is then stored in FP8), or set fp8: false",
           r.where("fp8"));
  LF_CHECK(!c.adapter.use_dora, ConfigError,
           "{}: DoRA with FP8 is not implemented (its weight norm reads the dense base, which LoRA's FP8 base no longer "
           "holds); use LoRA (use_dora: false) with fp8, or DoRA in bf16",
           r.where("fp8"));
}

KeyDecl all_gather() {
  return no_effect("fp8_enable_fsdp_float8_all_gather",
                   "LLaMA-Factory 0.9.5 only logs it (its Float8LinearConfig is the rowwise recipe, which torchao's "
                   "float8 all-gather does not take): lf-train's ZeRO-3 gathers a LoRA base already stored in FP8 as "
                   "FP8, and full fine-tuning's weights in bf16, cast after the gather (the same numbers)");
}

}  // namespace

std::vector<KeyDecl> fp8_keys() {
  KeyDecl fp8 = implemented("fp8", LF_FIELD(precision, fp8),
                            "FP8 training on an sm_89+ GPU (H100 / H200, L40, RTX 40): the decoder linear layers' GEMMs "
                            "in FP8 through cuBLASLt (ATen's _scaled_mm), as torchao's Float8Linear computes them; "
                            "LoRA's frozen base stored once in FP8 (half of bf16's bytes); norms, attention, the "
                            "router, embeddings and the LM head stay in high precision. Refused on the CPU and on "
                            "older GPUs (never a silent bf16 run). docs/training.md, \"FP8 training\"")
                    .sample("true")
                    .observe("refused");
  auto own_check = fp8.check;
  fp8.check = [own_check](const Reader& r, const JobPlan& c) {
    if (own_check) own_check(r, c);
    check_fp8(r, c);
  };
  return {
      std::move(fp8),
      no_effect("fp8_backend",
                "lf-train has one FP8 backend of its own (torchao's Float8Linear arithmetic) for every value: "
                "LLaMA-Factory's auto / torchao (any value but te) are torchao's Float8Linear, te Transformer "
                "Engine's delayed scaling, which is not reproduced (lf-train's scales come from the current tensor)"),
      implemented("fp8_recipe", LF_FIELD(precision, fp8_recipe),
                  "lf-train's own, with fp8 (torchao's Float8LinearRecipeName): rowwise (a power-of-two scale per "
                  "row of each GEMM operand, every operand e4m3: LLaMA-Factory's choice, robust to outlier "
                  "channels) or tensorwise (one scale per tensor, the output gradient in e5m2, fast accumulation "
                  "in the forward: torchao's fastest) or rowwise_with_gw_hp (rowwise's forward, the input gradient with "
                  "the weight under one scale, the weight gradient a bf16 GEMM: no casts along the tokens; LoRA's "
                  "frozen base runs it as rowwise)")
          .own()
          .choices({"rowwise", "tensorwise", "rowwise_with_gw_hp"})
          .check([](const Reader& r, const std::string& key, const std::string&) {
            LF_CHECK(!r.has(key) || r.has("fp8"), ConfigError,
                     "{}: `{}` is FP8's recipe and fp8 is not set: set `fp8: true` (an sm_89+ GPU), or remove {}",
                     r.where(key), key, key);
          })
          .sample("tensorwise")
          .observe("refused"),
      all_gather(),
  };
}

}  // namespace lf::config
