#pragma once
// GPT-2's reversible byte <-> printable-char map (bytes_to_unicode). Byte-level
// vocabularies spell every token in these chars; we tokenize raw bytes and map
// only at the vocabulary boundary.
#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace lf::byte_level {

// UTF-8 spelling of the char that stands for byte b.
const std::string& byte_to_char(unsigned char b);
// The byte a code point stands for, if it is one of the 256 mapped chars.
std::optional<unsigned char> char_to_byte(char32_t cp);
// Mapped spelling -> raw bytes; nullopt if some char is not a mapped char.
std::optional<std::string> unmap(std::string_view token);
std::string map(std::string_view raw);

}  // namespace lf::byte_level
