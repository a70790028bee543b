#pragma once
// Hash containers keyed by std::string that accept std::string_view lookups
// without allocating (C++20 heterogeneous lookup).
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace lf {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

using Vocab = StringMap<int32_t>;

}  // namespace lf
