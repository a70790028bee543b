#pragma once
// The preference stages' reference-model and DPO-variant keys (reference_keys.cpp): ref_model,
// ref_model_adapters, ref_model_quantization_bit, pref_bco_weight, ld_alpha. Internal to src/config.
#include <vector>

#include "config_reader.h"
#include "config_schema.h"

namespace lf::config {

// The declarations config_schema.cpp lists.
std::vector<KeyDecl> reference_keys();
// The rules between them and the stage (ConfigError where LLaMA-Factory would ignore the key).
void check_reference(const Reader& r, const JobPlan& c);

}  // namespace lf::config
