#pragma once
// Small UTF-8 helpers shared by the tokenizer stages. Inputs are assumed valid
// UTF-8 unless a function says otherwise (Tokenizer::encode validates once).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace lf::utf8 {

// Length in bytes of the sequence starting with lead byte `c` (1 for stray bytes).
inline size_t seq_len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c >> 5) == 0x6) return 2;
  if ((c >> 4) == 0xE) return 3;
  if ((c >> 3) == 0x1E) return 4;
  return 1;
}

// Decodes the code point at s[i] (valid input); advances i.
inline char32_t next(std::string_view s, size_t& i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = seq_len(c);
  if (i + n > s.size()) n = 1;
  char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}

inline void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Byte offset of the first invalid sequence, or npos when `s` is valid UTF-8.
size_t find_invalid(std::string_view s);

// Rust's String::from_utf8_lossy: each maximal invalid subpart becomes U+FFFD.
// HF decoders use it, so decode() must too to give the same strings.
std::string from_utf8_lossy(std::string_view bytes);

inline bool is_valid(std::string_view s) { return find_invalid(s) == std::string_view::npos; }

}  // namespace lf::utf8
