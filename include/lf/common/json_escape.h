#pragma once
// Escapes a string for embedding in a JSON string literal (event logs, JSONL
// outputs written without a JSON library).
#include <string>
#include <string_view>

namespace lf {
std::string json_escape(std::string_view s);
}  // namespace lf
