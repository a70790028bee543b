// LLaMA-Factory 0.9.5's parse_template (data/template.py): with `template:` unset, the template is read
// off the tokenizer's own Jinja chat template, rendered as transformers' apply_chat_template(tokenize=False)
// renders it (lf/data/jinja.h), character for character as LLaMA-Factory slices the renderings.
#include <fmt/format.h>

#include <regex>

#include "jinja_text.h"
#include "lf/common/error.h"
#include "lf/data/chat_template.h"
#include "lf/data/jinja.h"

namespace lf {
namespace {

using nlohmann::ordered_json;

// Python's s[n:], n counted in characters.
std::string drop(const std::string& s, size_t n) {
  const auto cps = jinja::code_points(s);
  std::string out;
  for (size_t k = n; k < cps.size(); ++k) out += cps[k];
  return out;
}
size_t length(const std::string& s) { return jinja::code_points(s).size(); }

// parse_template's find_diff: the characters of `long_str` that a greedy walk does not match in `short_str`.
std::string find_diff(const std::string& short_str, const std::string& long_str) {
  const auto a = jinja::code_points(short_str), b = jinja::code_points(long_str);
  size_t i = 0, j = 0;
  std::string diff;
  while (i < a.size() && j < b.size()) {
    if (a[i] == b[j]) {
      ++i;
      ++j;
    } else {
      diff += b[j++];
    }
  }
  return diff;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

class Renderer {
 public:
  Renderer(const Tokenizer& tok, const std::string& source) : template_(source) {
    // transformers passes the tokenizer's special_tokens_map: only the tokens it has.
    for (auto [key, id] : {std::pair{"bos_token", tok.bos_id()}, {"eos_token", tok.eos_id()}, {"pad_token", tok.pad_id()}})
      if (id) specials_[key] = tok.id_to_token(*id);
  }
  // apply_chat_template(messages, add_generation_prompt, tokenize=False).
  std::string render(const std::vector<std::pair<const char*, const char*>>& turns, bool add_generation_prompt) const {
    ordered_json ctx = {{"messages", ordered_json::array()}, {"tools", nullptr}, {"documents", nullptr},
                        {"add_generation_prompt", add_generation_prompt}};
    for (const auto& [role, content] : turns) ctx["messages"].push_back({{"role", role}, {"content", content}});
    for (const auto& [k, v] : specials_.items()) ctx[k] = v;
    return template_.render(ctx);
  }

 private:
  jinja::Template template_;
  ordered_json specials_ = ordered_json::object();
};

Slots text_slot(const std::string& s) { return Slots{Slot{Slot::Kind::kText, s}}; }

// LLaMA-Factory's StringFormatter refuses a slot without a {{name}} placeholder (its __post_init__): a parsed
// slot that lost it (a chat template that drops an empty system turn, a prefix sliced off text that lacks it)
// fails there, and so here.
void require_placeholder(const std::string& slot, const char* which) {
  static const std::regex kPlaceholder(R"(\{\{[a-zA-Z_]+\}\})");
  LF_CHECK(std::regex_search(slot, kPlaceholder), ConfigError,
           "A placeholder is required in the string formatter (LLaMA-Factory's error: the parsed {} slot is '{}')",
           which, slot);
}

}  // namespace

TemplateSpec parse_template(const Tokenizer& tokenizer, const std::string& chat_template) {
  try {
    const Renderer r(tokenizer, chat_template);
    const auto ids = tokenizer.encode("", /*add_special=*/true);
    const std::string prefix = tokenizer.decode(ids);
    const size_t p = length(prefix);
    const std::string content = "{{content}}";
    const std::string system_slot = drop(r.render({{"system", "{{content}}"}}, false), p);
    const std::string user_slot_empty_system = drop(r.render({{"system", ""}, {"user", "{{content}}"}}, true), p);
    std::string user_slot = drop(r.render({{"user", "{{content}}"}}, true), p);
    std::string assistant_slot =
        drop(r.render({{"user", "{{content}}"}, {"assistant", "{{content}}"}}, false), p + length(user_slot));
    const bool reasoning = assistant_slot.find("<think>") != std::string::npos;
    assistant_slot = replace_all(replace_all(assistant_slot, "<think>", ""), "</think>", "");
    assistant_slot = assistant_slot.substr(std::min(assistant_slot.find_first_not_of('\n'), assistant_slot.size()));
    std::string default_system;
    if (length(user_slot) > length(user_slot_empty_system)) {
      default_system = find_diff(user_slot_empty_system, user_slot);
      std::string sole_system = system_slot;
      if (const size_t at = sole_system.find(content); at != std::string::npos) sole_system.replace(at, content.size(), default_system);
      user_slot = drop(user_slot, length(sole_system));
    }
    require_placeholder(user_slot, "user");
    require_placeholder(assistant_slot, "assistant");
    require_placeholder(system_slot, "system");
    TemplateSpec t;
    t.name = "(parsed from the tokenizer's chat template)";
    t.format_user = text_slot(user_slot);
    t.format_assistant = text_slot(assistant_slot);
    t.format_system = text_slot(system_slot);
    t.format_function = text_slot(assistant_slot);
    t.format_observation = text_slot(user_slot);
    if (!prefix.empty()) t.format_prefix = text_slot(prefix);
    t.default_system = default_system;
    t.kind = reasoning ? TemplateKind::kReasoning : TemplateKind::kPlain;
    return t;  // stop_words, thought and tool-call words, flags: TemplateSpec's defaults are parse_template's
  } catch (const ConfigError& e) {
    LF_THROW(ConfigError,
             "`template:` is unset, so the template is parsed from the tokenizer's Jinja chat template at {} (as "
             "LLaMA-Factory's parse_template does), and rendering it failed: {}. Set `template:` to the name of the "
             "model's template (lf-train preview lists the known ones)",
             tokenizer.source().string(), e.what());
  }
}

}  // namespace lf
