#pragma once
// Levenshtein distance (insert, delete, substitute: cost 1 each), for the did-you-mean
// suggestions of unknown config keys and template names.
#include <cstddef>
#include <string>

namespace lf {

size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace lf
