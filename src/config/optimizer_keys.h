#pragma once
// The optimizer keys of the schema (optimizer_keys.cpp). Internal to src/config.
#include <vector>

#include "config_schema.h"

namespace lf::config {

std::vector<KeyDecl> optimizer_keys();

}  // namespace lf::config
