// LLaMA-Factory 0.9.5's Template._get_jinja_template / Llama2Template._get_jinja_template
// (data/template.py), character for character: the chat template a saved tokenizer carries, so
// that a served model formats prompts as it was trained on.
#include <optional>
#include <string>

#include "lf/data/chat_template.h"

namespace lf {
namespace {

std::string jinja_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '\'') out += '\\';
    out += ch;
  }
  return out;
}

// Template._convert_slots_to_jinja: quoted text pieces around `placeholder`, the fixed bos / eos
// token strings; a token-id slot (a dict in LLaMA-Factory) cannot be written: nullopt.
std::optional<std::string> slots_to_jinja(const Slots& slots, const ChatTemplate& t,
                                          const std::string& placeholder = "content") {
  std::string out;
  auto add = [&](const std::string& item) { out += (out.empty() ? "" : " + ") + item; };
  for (const auto& slot : slots) {
    switch (slot.kind) {
      case Slot::Kind::kText: {
        const std::string key = "{{content}}";
        const size_t at = slot.text.find(key);
        const std::string first = slot.text.substr(0, at);
        if (!first.empty()) add("'" + jinja_escape(first) + "'");
        if (at != std::string::npos) {
          add(placeholder);
          // Python's split: the piece up to the next placeholder, if any.
          const size_t rest = at + key.size();
          const size_t next = slot.text.find(key, rest);
          const std::string second = slot.text.substr(rest, next == std::string::npos ? std::string::npos : next - rest);
          if (!second.empty()) add("'" + jinja_escape(second) + "'");
        }
        break;
      }
      case Slot::Kind::kBos:
        if (t.bos_id()) add("'" + t.tokenizer().id_to_token(*t.bos_id()) + "'");
        break;
      case Slot::Kind::kEos:
        add("'" + t.tokenizer().id_to_token(t.eos_id()) + "'");
        break;
      case Slot::Kind::kToken:
        return std::nullopt;  // "Dict is not supported."
    }
  }
  return out;
}

}  // namespace

std::optional<std::string> llamafactory_jinja_template(const ChatTemplate& t) {
  const auto& s = t.spec();
  const auto prefix = slots_to_jinja(s.format_prefix, t);
  const auto system = slots_to_jinja(s.format_system, t, "system_message");
  const auto user = slots_to_jinja(s.format_user, t);
  const auto assistant = slots_to_jinja(s.format_assistant, t);
  if (!prefix || !system || !user || !assistant) return std::nullopt;
  std::string j;
  if (!prefix->empty()) j += "{{ " + *prefix + " }}";
  if (!s.default_system.empty()) j += "{% set system_message = '" + jinja_escape(s.default_system) + "' %}";
  j += "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
       "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% endif %}";
  if (s.kind == TemplateKind::kLlama2) {
    // The system message is fused into the first user turn.
    j += "{% for message in loop_messages %}"
         "{% if loop.index0 == 0 and system_message is defined %}"
         "{% set content = " + *system + " + message['content'] %}"
         "{% else %}{% set content = message['content'] %}{% endif %}";
  } else {
    j += "{% if system_message is defined %}{{ " + *system + " }}{% endif %}"
         "{% for message in loop_messages %}"
         "{% set content = message['content'] %}";
  }
  j += "{% if message['role'] == 'user' %}"
       "{{ " + *user + " }}"
       "{% elif message['role'] == 'assistant' %}"
       "{{ " + *assistant + " }}"
       "{% endif %}"
       "{% endfor %}";
  return j;
}

}  // namespace lf
