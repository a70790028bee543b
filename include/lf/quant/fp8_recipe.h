#pragma once
// FP8 training's recipes (torchao's Float8LinearRecipeName), torch-free: the plan (lf_plan, which predicts a
// job without libtorch) and the training code (lf/quant/fp8.h) ask the same predicates of one enum instead of
// comparing the key's spelling. What each recipe computes is in lf/quant/fp8.h.
#include <cstdint>
#include <string_view>

namespace lf::quant {

enum class Fp8Recipe : uint8_t { kNone, kTensorwise, kRowwise, kRowwiseGwHp };

// Whether r casts its operands with a scale a row (rowwise and rowwise_with_gw_hp: the same casts where both cast).
inline bool fp8_rowwise(Fp8Recipe r) { return r == Fp8Recipe::kRowwise || r == Fp8Recipe::kRowwiseGwHp; }
// Whether r's weight gradient is an FP8 GEMM (all but rowwise_with_gw_hp).
inline bool fp8_weight_grad_in_fp8(Fp8Recipe r) { return r != Fp8Recipe::kRowwiseGwHp; }

// "tensorwise" / "rowwise" / "rowwise_with_gw_hp" (ConfigError for another name); "none" for kNone.
Fp8Recipe fp8_recipe_from_name(std::string_view name);
std::string_view fp8_recipe_name(Fp8Recipe r);

}  // namespace lf::quant
