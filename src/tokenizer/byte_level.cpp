#include "byte_level.h"

#include <unordered_map>

#include "utf8.h"

namespace lf::byte_level {
namespace {

struct Tables {
  std::array<std::string, 256> to_char;
  std::array<int, 512> from_cp;  // mapped code points are all < 0x144
  Tables() {
    from_cp.fill(-1);
    std::array<bool, 256> printable{};
    for (int b = '!'; b <= '~'; ++b) printable[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      char32_t cp = printable[b] ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      utf8::append(to_char[b], cp);
      from_cp[cp] = b;
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::string& byte_to_char(unsigned char b) { return tables().to_char[b]; }

std::optional<unsigned char> char_to_byte(char32_t cp) {
  if (cp >= 512) return std::nullopt;
  int b = tables().from_cp[cp];
  if (b < 0) return std::nullopt;
  return static_cast<unsigned char>(b);
}

std::optional<std::string> unmap(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  size_t i = 0;
  while (i < token.size()) {
    auto b = char_to_byte(utf8::next(token, i));
    if (!b) return std::nullopt;
    out.push_back(static_cast<char>(*b));
  }
  return out;
}

std::string map(std::string_view raw) {
  std::string out;
  for (unsigned char c : raw) out += byte_to_char(c);
  return out;
}

}  // namespace lf::byte_level
