#pragma once
// LLaMA-Factory's FP8 keys and lf-train's fp8_recipe (fp8_keys.cpp). Internal to src/config.
#include <vector>

#include "config_schema.h"

namespace lf::config {

// The declarations config_schema.cpp lists (fp8's own check holds LLaMA-Factory's rule against quantization).
std::vector<KeyDecl> fp8_keys();

}  // namespace lf::config
