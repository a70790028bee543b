#pragma once
// Split patterns of HF tokenizer.json (written for Oniguruma) run on PCRE2 with
// UTF + UCP, JIT-compiled. `\s`/`\S` are rewritten to Oniguruma's meaning
// (Unicode White_Space, which includes U+0085) since PCRE2's UCP \s differs.
//
// Threading: a compiled Regex is immutable; matching uses a per-thread JIT
// stack and match block, so find_all is safe from many threads.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lf {

class Regex {
 public:
  explicit Regex(const std::string& pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Non-overlapping matches [start, end) in `s`, leftmost first, as
  // Oniguruma's search loop finds them. `s` must be valid UTF-8.
  void find_all(std::string_view s, std::vector<std::pair<uint32_t, uint32_t>>& out) const;

  static std::string escape(std::string_view literal);

 private:
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

}  // namespace lf
