#pragma once
// A Jinja renderer for chat templates: the subset of Jinja2 that Hugging Face chat templates use, with
// the environment transformers' apply_chat_template renders them in (trim_blocks, lstrip_blocks,
// loopcontrols, the `tojson` filter as json.dumps(ensure_ascii=False), raise_exception, strftime_now,
// `{% generation %}` blocks rendered as their body). Statements: if / elif / else, for (tuple targets,
// `if` filters, `else`, loop.*), set (names, namespace attributes, blocks), macro, break, continue.
// Expressions: literals, lists, dicts, attribute / item / slice access, calls, filters, tests, the
// arithmetic, comparison, `in`, `~`, `and` / `or` / `not` and `a if b else c` operators, the string,
// list and dict methods templates call (strip, split, startswith, items, get, append, ...).
//
// Where a template uses something outside the subset, parse or render throws ConfigError naming the
// construct and the line, never a silently different text. Thread-compatible: a Template is immutable
// after parse; render may run on several threads at once.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace lf::jinja {

struct Program;  // the parsed template (jinja_parse.cpp)

class Template {
 public:
  // Throws ConfigError (the construct, the template's line) on syntax outside the subset.
  explicit Template(std::string_view source);
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // `context`: the template's variables (messages, add_generation_prompt, bos_token, tools, ...),
  // dicts in their insertion order. Throws ConfigError for raise_exception and for errors of the
  // template (an unknown filter, a call of an undefined function, ...).
  std::string render(const nlohmann::ordered_json& context) const;

 private:
  std::unique_ptr<Program> program_;
};

}  // namespace lf::jinja
