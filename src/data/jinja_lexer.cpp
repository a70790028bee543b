// Jinja source -> tags and text (jinja_ast.h: Segment), with the whitespace rules of transformers'
// chat-template environment: trim_blocks (a newline right after a block or comment tag is dropped),
// lstrip_blocks (blanks from a line's start up to a block tag), `{%-` / `-%}` (all whitespace on that side)
// and `{%+` (no lstrip), as Jinja2's lexer applies them.
#include <algorithm>
#include <cctype>

#include "jinja_ast.h"
#include "lf/common/error.h"

namespace lf::jinja {
namespace {

bool blank(char c) { return c == ' ' || c == '\t'; }
bool space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// The end of a tag opened at `from` (the index of its closing "}}" / "%}" / "#}"), skipping quoted text.
size_t tag_end(std::string_view src, size_t from, char close, int line) {
  char quote = 0;
  for (size_t k = from; k + 1 < src.size(); ++k) {
    const char c = src[k];
    if (quote) {
      if (c == '\\') ++k;
      else if (c == quote) quote = 0;
    } else if (close != '#' && (c == '\'' || c == '"')) {
      quote = c;
    } else if (c == close && src[k + 1] == '}') {
      return k;
    }
  }
  LF_THROW(ConfigError, "chat template line {}: a tag opened here is never closed", line);
}

}  // namespace

std::vector<Segment> segments(std::string_view src) {
  std::vector<Segment> out;
  std::string text;
  int line = 1, text_line = 1;
  bool strip_next = false, trim_next = false, line_starting = true;
  size_t pos = 0;
  auto flush_text = [&](bool lstrip, bool rstrip_all) {
    if (rstrip_all) {
      while (!text.empty() && space(text.back())) text.pop_back();
    } else if (lstrip) {
      const size_t nl = text.rfind('\n');
      const size_t from = nl == std::string::npos ? 0 : nl + 1;
      if ((nl != std::string::npos || line_starting) &&
          std::all_of(text.begin() + static_cast<long>(from), text.end(), blank))
        text.erase(from);
    }
    if (!text.empty()) out.push_back({Segment::Kind::kText, text, text_line});
    text.clear();
  };
  while (pos < src.size()) {
    const size_t open = src.find('{', pos);
    const bool tag = open != std::string::npos && open + 1 < src.size() &&
                     (src[open + 1] == '{' || src[open + 1] == '%' || src[open + 1] == '#');
    const size_t upto = tag ? open : (open == std::string::npos ? src.size() : open + 1);
    std::string piece(src.substr(pos, upto - pos));
    if (strip_next || trim_next) {
      size_t skip = 0;
      if (strip_next) while (skip < piece.size() && space(piece[skip])) ++skip;
      else if (piece.rfind("\r\n", 0) == 0) skip = 2;
      else if (!piece.empty() && piece[0] == '\n') skip = 1;
      if (skip) line_starting = piece[skip - 1] == '\n';
      piece.erase(0, skip);
      if (!piece.empty() || !tag) strip_next = trim_next = false;
    }
    if (text.empty()) text_line = line;
    text += piece;
    for (char c : piece) line += c == '\n';
    pos = upto;
    if (!tag) continue;
    const char kind = src[open + 1];
    size_t body = open + 2;
    const bool minus_left = body < src.size() && src[body] == '-';
    const bool plus_left = body < src.size() && src[body] == '+';
    if (minus_left || plus_left) ++body;
    const char close = kind == '{' ? '}' : kind;
    const size_t end = tag_end(src, body, close, line);
    const bool minus_right = end > body && src[end - 1] == '-';
    std::string content(src.substr(body, (minus_right ? end - 1 : end) - body));
    const bool block = kind != '{';
    flush_text(block && !plus_left, minus_left);
    line_starting = false;  // until a trimmed newline after this tag says otherwise
    if (kind != '#') out.push_back({kind == '{' ? Segment::Kind::kExpr : Segment::Kind::kStmt, content, line});
    for (size_t k = open; k < end + 2; ++k) line += src[k] == '\n';
    pos = end + 2;
    strip_next = minus_right;
    trim_next = block && !minus_right;
  }
  flush_text(false, false);
  return out;
}


}  // namespace lf::jinja
