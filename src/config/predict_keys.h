#pragma once
// The keys of LLaMA-Factory's predict run (predict_keys.cpp): do_train, do_predict, predict_with_generate and
// its GeneratingArguments (issue 34). Internal to src/config.
#include <vector>

#include "config_schema.h"

namespace lf::config {

// The declarations config_schema.cpp lists.
std::vector<KeyDecl> predict_keys();

}  // namespace lf::config
