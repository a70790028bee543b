#define PCRE2_CODE_UNIT_WIDTH 8
#include "regex.h"

#include <pcre2.h>

#include "lf/common/error.h"
#include "utf8.h"

namespace lf {
namespace {

// Oniguruma's \s: the Unicode White_Space property.
constexpr std::string_view kSpaceClassBody = "\\t-\\r\\x{85}\\p{Z}";

#include "unicode_delta.inc"

// \p{L} / \p{N} widened to HF's newer Unicode tables (see make_unicode_delta.py).
std::string class_body(char prop) {
  return std::string("\\p{") + prop + "}" + (prop == 'L' ? kExtraL : kExtraN);
}

std::string rewrite_for_pcre2(std::string_view p) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char e = p[++i];
      if (e == 's') {
        out += in_class ? std::string(kSpaceClassBody) : "[" + std::string(kSpaceClassBody) + "]";
      } else if (e == 'p' && i + 3 < p.size() && p[i + 1] == '{' && p[i + 3] == '}' &&
                 (p[i + 2] == 'L' || p[i + 2] == 'N')) {
        std::string body = class_body(p[i + 2]);
        out += in_class ? body : "[" + body + "]";
        i += 3;
      } else if (e == 'S' && !in_class) {
        out += "[^" + std::string(kSpaceClassBody) + "]";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

struct ThreadState {
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_match_data* data = nullptr;
  ThreadState() {
    stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    context = pcre2_match_context_create(nullptr);
    pcre2_jit_stack_assign(context, nullptr, stack);
    data = pcre2_match_data_create(4, nullptr);
  }
  ~ThreadState() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
  }
};

ThreadState& thread_state() {
  thread_local ThreadState state;
  return state;
}

}  // namespace

Regex::Regex(const std::string& pattern) {
  std::string rewritten = rewrite_for_pcre2(pattern);
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.data()), rewritten.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    LF_THROW(ConfigError,
             "tokenizer split regex does not compile with PCRE2 at offset {}: {} (pattern: {})",
             offset, reinterpret_cast<const char*>(msg), pattern);
  }
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void Regex::find_all(std::string_view s, std::vector<std::pair<uint32_t, uint32_t>>& out) const {
  ThreadState& ts = thread_state();
  auto* code = static_cast<pcre2_code*>(code_);
  auto subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t start = 0;
  while (start <= s.size()) {
    int rc = jit_ ? pcre2_jit_match(code, subject, s.size(), start, PCRE2_NO_UTF_CHECK, ts.data,
                                    ts.context)
                  : pcre2_match(code, subject, s.size(), start, PCRE2_NO_UTF_CHECK, ts.data,
                                ts.context);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof(msg));
      LF_THROW(ConfigError, "tokenizer split regex failed on a {}-byte piece: {}", s.size(),
               reinterpret_cast<const char*>(msg));
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(ts.data);
    size_t b = ov[0], e = ov[1];
    out.emplace_back(static_cast<uint32_t>(b), static_cast<uint32_t>(e));
    if (e == b) {
      if (e >= s.size()) return;
      size_t next = e;
      utf8::next(s, next);
      start = next;
    } else {
      start = e;
    }
  }
}

std::string Regex::escape(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}-/").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace lf
