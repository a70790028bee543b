#pragma once
// Closest known names to a misspelt one (edit distance), for error messages.
#include <string>
#include <vector>

namespace lf::config {

// Up to `limit` candidates within a distance that scales with the word's length, closest first.
std::vector<std::string> did_you_mean(const std::string& word, const std::vector<std::string>& candidates,
                                      size_t limit = 3);

}  // namespace lf::config
