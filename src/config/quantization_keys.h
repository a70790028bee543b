#pragma once
// LLaMA-Factory's quantization keys (quantization_keys.cpp). Internal to src/config.
#include <vector>

#include "config_reader.h"
#include "config_schema.h"

namespace lf::config {

// The declarations config_schema.cpp lists.
std::vector<KeyDecl> quantization_keys();
// The rules between the quantization keys and the adapter's (ConfigError with LLaMA-Factory's reason).
void check_quantization(const Reader& r, const JobPlan& c);

}  // namespace lf::config
