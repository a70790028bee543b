#include "did_you_mean.h"

#include <algorithm>

#include "lf/common/edit_distance.h"

namespace lf::config {

std::vector<std::string> did_you_mean(const std::string& word, const std::vector<std::string>& candidates,
                                      size_t limit) {
  size_t max_distance = std::max<size_t>(2, word.size() / 3);
  std::vector<std::pair<size_t, std::string>> scored;
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d <= max_distance) scored.emplace_back(d, c);
  }
  std::stable_sort(scored.begin(), scored.end(), [](auto& a, auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && i < limit; ++i) out.push_back(scored[i].second);
  return out;
}

}  // namespace lf::config
