// FP8 recipes' names (lf/quant/fp8_recipe.h): torch-free, linked by the plan and by the training code.
#include "lf/quant/fp8_recipe.h"

#include "lf/common/error.h"

namespace lf::quant {

Fp8Recipe fp8_recipe_from_name(std::string_view name) {
  if (name == "tensorwise") return Fp8Recipe::kTensorwise;
  if (name == "rowwise") return Fp8Recipe::kRowwise;
  if (name == "rowwise_with_gw_hp") return Fp8Recipe::kRowwiseGwHp;
  if (name == "none") return Fp8Recipe::kNone;
  LF_THROW(ConfigError,
           "fp8_recipe `{}`: expected tensorwise, rowwise or rowwise_with_gw_hp (torchao's Float8LinearRecipeName)",
           name);
}

std::string_view fp8_recipe_name(Fp8Recipe r) {
  switch (r) {
    case Fp8Recipe::kTensorwise: return "tensorwise";
    case Fp8Recipe::kRowwise: return "rowwise";
    case Fp8Recipe::kRowwiseGwHp: return "rowwise_with_gw_hp";
    case Fp8Recipe::kNone: break;
  }
  return "none";
}

}  // namespace lf::quant
