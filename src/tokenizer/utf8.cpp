#include "utf8.h"

namespace lf::utf8 {
namespace {

// Length of the valid sequence at s[i], or 0 with `bad` = length of the maximal
// invalid subpart (WHATWG/Unicode "substitution of maximal subparts").
size_t valid_len(std::string_view s, size_t i, size_t& bad) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  bad = 1;
  if (c < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t k = 1; k < n; ++k) {
    if (i + k >= s.size()) return 0;
    unsigned char d = b(i + k);
    unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (d < l || d > h) return 0;
    bad = k + 1;
  }
  return n;
}

}  // namespace

size_t find_invalid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t bad;
    size_t n = valid_len(s, i, bad);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

std::string from_utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t bad;
    size_t n = valid_len(s, i, bad);
    if (n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out.append("\xEF\xBF\xBD");
      i += bad;
    }
  }
  return out;
}

}  // namespace lf::utf8
