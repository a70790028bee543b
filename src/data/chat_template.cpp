#include "lf/data/chat_template.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>

#include "lf/common/edit_distance.h"
#include "lf/common/error.h"
#include "tool_format.h"

namespace lf {
namespace {

Slot text(std::string s) { return Slot{Slot::Kind::kText, std::move(s)}; }
Slot bos() { return Slot{Slot::Kind::kBos, ""}; }
Slot eos() { return Slot{Slot::Kind::kEos, ""}; }
Slot token(std::string s) { return Slot{Slot::Kind::kToken, std::move(s)}; }

TemplateSpec gen(const char* name, Slots user, Slots assistant, Slots system, Slots function,
                 Slots observation, Slots prefix, const char* default_system,
                 std::vector<std::string> stop_words, const char* tool_format, const char* tools_format,
                 const char* thought_open, const char* thought_close, const char* call_open,
                 const char* call_close, bool efficient_eos, bool replace_eos, bool replace_jinja_template,
                 TemplateKind kind) {
  TemplateSpec t;
  t.name = name;
  t.format_user = std::move(user);
  t.format_assistant = std::move(assistant);
  t.format_system = std::move(system);
  t.format_function = std::move(function);
  t.format_observation = std::move(observation);
  t.format_prefix = std::move(prefix);
  t.default_system = default_system;
  t.stop_words = std::move(stop_words);
  t.tool_format = tool_format;
  t.tools_format = tools_format;
  t.thought_open = thought_open;
  t.thought_close = thought_close;
  t.tool_call_open = call_open;
  t.tool_call_close = call_close;
  t.efficient_eos = efficient_eos;
  t.replace_eos = replace_eos;
  t.replace_jinja_template = replace_jinja_template;
  t.kind = kind;
  return t;
}

const std::map<std::string, TemplateSpec>& registry() {
  static const std::map<std::string, TemplateSpec> templates = [] {
    std::map<std::string, TemplateSpec> m;
    auto add = [&](TemplateSpec t) { m.emplace(t.name, std::move(t)); };
#include "template_registry.inc"
    return m;
  }();
  return templates;
}

// StringFormatter.apply: each placeholder replaced once, in keyword order.
Slots apply(const Slots& slots, const std::vector<std::pair<std::string, std::string>>& kwargs) {
  Slots out = slots;
  for (Slot& s : out) {
    if (s.kind != Slot::Kind::kText) continue;
    for (const auto& [name, value] : kwargs) {
      const std::string key = "{{" + name + "}}";
      if (size_t at = s.text.find(key); at != std::string::npos) s.text.replace(at, key.size(), value);
    }
  }
  return out;
}

// Template.remove_thought: re.sub(open(.*?)close, "", DOTALL).lstrip("\n").
std::string remove_thought(const std::string& content, const std::string& open, const std::string& close) {
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t o = content.find(open, pos);
    size_t c = o == std::string::npos ? std::string::npos : content.find(close, o + open.size());
    if (c == std::string::npos) break;
    out.append(content, pos, o - pos);
    pos = c + close.size();
  }
  out.append(content, pos);
  size_t first = out.find_first_not_of('\n');
  return first == std::string::npos ? std::string() : out.substr(first);
}

std::string strip(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\n\r\f\v"), e = s.find_last_not_of(" \t\n\r\f\v");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::string suggest(const std::string& name) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& [known, t] : registry()) {
    size_t d = edit_distance(name, known);
    if (d < best_d) {
      best_d = d;
      best = known;
    }
  }
  return best_d <= 3 ? fmt::format("did you mean '{}'? ", best) : std::string();
}

std::string join_names() {
  std::string s;
  for (const auto& [name, t] : registry()) s += (s.empty() ? "" : ", ") + name;
  return s;
}

}  // namespace

std::vector<std::string> ChatTemplate::names() {
  std::vector<std::string> v;
  for (const auto& [name, t] : registry()) v.push_back(name);
  return v;
}

ChatTemplate::ChatTemplate(const std::string& name, const Tokenizer& tokenizer,
                           const TemplateOptions& options)
    : options_(options), tokenizer_(tokenizer) {
  const auto& default_system = options.default_system;
  const auto& tool_format = options.tool_format;
  auto it = registry().find(name);
  LF_CHECK(it != registry().end(), ConfigError,
           "template '{}' is not known to lf-train ({}known: {}); set `template:` to one of them",
           name, suggest(name), join_names());
  spec_ = it->second;
  if (default_system) spec_.default_system = *default_system;
  if (tool_format) {
    LF_CHECK(*tool_format == "default" || *tool_format == "qwen" || *tool_format == "llama3" ||
                 *tool_format == "mistral",
             ConfigError, "tool_format '{}' is not supported (default, qwen, llama3, mistral)",
             *tool_format);
    spec_.tool_format = *tool_format;
    spec_.tools_format = *tool_format;
    spec_.format_function = spec_.efficient_eos ? Slots{text("{{content}}")} : Slots{text("{{content}}"), eos()};
  }

  // Template.fix_special_tokens.
  std::optional<int32_t> eos = tokenizer.eos_id();
  if (spec_.replace_eos) {
    auto id = tokenizer.token_to_id(spec_.stop_words.at(0));
    LF_CHECK(id.has_value(), ConfigError,
             "template '{}' uses '{}' as its end-of-turn token, but the tokenizer at {} has no "
             "such token; use the template that matches the model",
             name, spec_.stop_words[0], tokenizer.source().string());
    eos = id;
  }
  if (!eos) {
    eos = tokenizer.token_to_id("<|endoftext|>");
    LF_CHECK(eos.has_value(), ConfigError,
             "the tokenizer at {} defines no eos_token and has no <|endoftext|>; set eos_token in "
             "tokenizer_config.json",
             tokenizer.source().string());
  }
  eos_id_ = *eos;
  pad_id_ = tokenizer.pad_id().value_or(eos_id_);
  bos_id_ = tokenizer.bos_id();
}

std::vector<int32_t> ChatTemplate::to_ids(const Slots& slots) const {
  std::vector<int32_t> ids;
  for (const Slot& s : slots) {
    switch (s.kind) {
      case Slot::Kind::kText:
        if (!s.text.empty()) {
          auto part = tokenizer_.encode(s.text, false);
          ids.insert(ids.end(), part.begin(), part.end());
        }
        break;
      case Slot::Kind::kBos:
        if (bos_id_) ids.push_back(*bos_id_);
        break;
      case Slot::Kind::kEos:
        ids.push_back(eos_id_);
        break;
      case Slot::Kind::kToken: {
        auto id = tokenizer_.token_to_id(s.text);
        LF_CHECK(id.has_value(), ConfigError, "template token '{}' is not in the vocabulary", s.text);
        ids.push_back(*id);
        break;
      }
    }
  }
  return ids;
}

std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> ChatTemplate::encode_multiturn(
    const std::vector<Message>& messages_in, const std::string& system, const std::string& tools,
    const std::string& origin, bool mask_history) const {
  std::vector<std::vector<int32_t>> encoded;
  if (spec_.kind != TemplateKind::kReasoning) {
    encoded = encode_messages(messages_in, system, tools, origin);
  } else {
    // ReasoningTemplate.encode_multiturn.
    std::vector<Message> messages = messages_in;
    const bool discard_history_cot = mask_history && !options_.preserve_thinking;
    auto drop = [&](Message& m) { m.content = remove_thought(m.content, spec_.thought_open, spec_.thought_close); };
    if (!options_.enable_thinking)
      for (size_t i = 1; i < messages.size(); i += 2) drop(messages[i]);
    if (discard_history_cot)
      for (size_t i = 1; i + 2 < messages.size(); i += 2) drop(messages[i]);
    encoded = encode_messages(messages, system, tools, origin);
    const std::vector<int32_t> thought_ids = tokenizer_.encode(spec_.thought_open + spec_.thought_close, false);
    const std::string open_word = strip(spec_.thought_open), close_word = strip(spec_.thought_close);
    std::vector<size_t> turns;
    if (discard_history_cot) {
      turns.push_back(messages.size() - 2);
    } else {
      for (size_t i = 0; i < messages.size(); i += 2) turns.push_back(i);
    }
    for (size_t i : turns) {
      if (i + 1 >= messages.size()) continue;
      const std::string& reply = messages[i + 1].content;
      if (reply.find(open_word) != std::string::npos || reply.find(close_word) != std::string::npos) continue;
      if (!options_.enable_thinking) {
        encoded[i].insert(encoded[i].end(), thought_ids.begin(), thought_ids.end());
      } else {
        encoded[i + 1].insert(encoded[i + 1].begin(), thought_ids.begin(), thought_ids.end());
      }
    }
  }
  std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> pairs;
  for (size_t i = 0; i + 1 < encoded.size(); i += 2)
    pairs.emplace_back(std::move(encoded[i]), std::move(encoded[i + 1]));
  return pairs;
}

std::pair<std::vector<int32_t>, std::vector<int32_t>> ChatTemplate::encode_oneturn(
    const std::vector<Message>& messages_in, const std::string& system, const std::string& tools,
    const std::string& origin) const {
  std::vector<Message> messages = messages_in;
  std::vector<int32_t> thought_ids;
  if (spec_.kind == TemplateKind::kReasoning) {
    // ReasoningTemplate.encode_oneturn: history thoughts dropped unless preserve_thinking, the
    // last one too without enable_thinking; an empty thought added to a reply that has none.
    auto drop = [&](Message& m) { m.content = remove_thought(m.content, spec_.thought_open, spec_.thought_close); };
    if (!options_.preserve_thinking)
      for (size_t i = 1; i + 2 < messages.size(); i += 2) drop(messages[i]);
    if (!options_.enable_thinking && !messages.empty()) drop(messages.back());
    const std::string& reply = messages.back().content;
    if (reply.find(strip(spec_.thought_open)) == std::string::npos &&
        reply.find(strip(spec_.thought_close)) == std::string::npos)
      thought_ids = tokenizer_.encode(spec_.thought_open + spec_.thought_close, false);
  }
  auto encoded = encode_messages(messages, system, tools, origin);
  std::pair<std::vector<int32_t>, std::vector<int32_t>> out;
  for (size_t i = 0; i + 1 < encoded.size(); ++i) out.first.insert(out.first.end(), encoded[i].begin(), encoded[i].end());
  if (!encoded.empty()) out.second = std::move(encoded.back());
  if (!thought_ids.empty()) {
    auto& side = options_.enable_thinking ? out.second : out.first;  // trained on, or prompt
    side.insert(options_.enable_thinking ? side.begin() : side.end(), thought_ids.begin(), thought_ids.end());
  }
  return out;
}

std::vector<std::vector<int32_t>> ChatTemplate::encode_messages(const std::vector<Message>& messages,
                                                                const std::string& system_in,
                                                                const std::string& tools,
                                                                const std::string& origin) const {
  const std::string system = system_in.empty() ? spec_.default_system : system_in;
  std::vector<std::vector<int32_t>> encoded;
  encoded.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const Message& m = messages[i];
    Slots elements;
    std::string system_text;
    if (i == 0) {
      elements = spec_.format_prefix;
      if (!system.empty() || !tools.empty()) {
        const std::string tool_text = tools.empty() ? "" : format_tools(spec_.tools_format, tools, origin);
        Slots sys = apply(spec_.format_system, {{"content", system + tool_text}});
        if (spec_.kind == TemplateKind::kLlama2) {
          // Llama2Template keeps only the first slot of the system formatter.
          system_text = sys.empty() ? "" : sys[0].text;
        } else {
          elements.insert(elements.end(), sys.begin(), sys.end());
        }
      }
    }
    Slots turn;
    switch (m.role) {
      case Role::kUser:
        turn = spec_.kind == TemplateKind::kLlama2
                   ? apply(spec_.format_user, {{"content", system_text + m.content}})
                   : apply(spec_.format_user, {{"content", m.content}, {"idx", std::to_string(i / 2)}});
        break;
      case Role::kAssistant:
        turn = apply(spec_.format_assistant, {{"content", m.content}});
        break;
      case Role::kObservation:
        turn = apply(spec_.format_observation, {{"content", m.content}});
        break;
      case Role::kFunction:
        turn = apply(spec_.format_function,
                     {{"content", format_function_calls(
                                      spec_.tool_format, m.content, spec_.kind != TemplateKind::kLlama2,
                                      {spec_.thought_open, spec_.thought_close, spec_.tool_call_open,
                                       spec_.tool_call_close},
                                      origin)}});
        break;
      default:
        LF_THROW(ConfigError, "{}: a system turn inside a conversation is not supported", origin);
    }
    elements.insert(elements.end(), turn.begin(), turn.end());
    encoded.push_back(to_ids(elements));
  }
  return encoded;
}

}  // namespace lf
