#include "did_you_mean.h"

#include <algorithm>

namespace lf::config {

namespace {
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}
}  // namespace

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
