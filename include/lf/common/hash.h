#pragma once
// FNV-1a 64: a stable, dependency-free fingerprint (config/command hashes,
// cache keys). Not cryptographic.
#include <cstdint>
#include <string>
#include <string_view>

namespace lf {

constexpr uint64_t kFnvOffset = 14695981039346656037ull;

constexpr uint64_t fnv1a64(std::string_view data, uint64_t h = kFnvOffset) {
  for (unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex64(uint64_t v);

}  // namespace lf
