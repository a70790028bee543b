#include "lf/data/chat_template.h"

#include <fmt/format.h>

#include <map>

#include "lf/common/error.h"
#include "tool_format.h"

namespace lf {
namespace {

Slot text(std::string s) { return Slot{Slot::Kind::kText, std::move(s)}; }
Slot bos() { return Slot{Slot::Kind::kBos, ""}; }
Slot eos() { return Slot{Slot::Kind::kEos, ""}; }

// register_template's defaults: user/system "{{content}}", assistant
// "{{content}}" + eos (no eos with efficient_eos), observation = user.
TemplateSpec make(std::string name, Slots user, Slots assistant, Slots system, Slots observation,
                  Slots prefix, std::string default_system, std::vector<std::string> stop_words,
                  bool efficient_eos, bool replace_eos, bool fuse_system, Slots function = {},
                  std::string tool_format = "default") {
  TemplateSpec t;
  t.name = std::move(name);
  const bool has_user = !user.empty();
  t.format_user = has_user ? user : Slots{text("{{content}}")};
  t.format_assistant = !assistant.empty() ? assistant
                       : efficient_eos     ? Slots{text("{{content}}")}
                                           : Slots{text("{{content}}"), eos()};
  t.format_system = !system.empty() ? system : Slots{text("{{content}}")};
  t.format_observation = !observation.empty() ? observation : t.format_user;
  t.format_prefix = std::move(prefix);
  // The default function formatter reuses the assistant slots.
  t.format_function = !function.empty() ? std::move(function) : t.format_assistant;
  t.tool_format = std::move(tool_format);
  t.default_system = std::move(default_system);
  t.stop_words = std::move(stop_words);
  t.efficient_eos = efficient_eos;
  t.replace_eos = replace_eos;
  t.fuse_system_into_user = fuse_system;
  return t;
}

const std::map<std::string, TemplateSpec>& registry() {
  static const std::map<std::string, TemplateSpec> templates = [] {
    std::map<std::string, TemplateSpec> m;
    auto add = [&](TemplateSpec t) { m.emplace(t.name, std::move(t)); };
    add(make("alpaca", {text("### Instruction:\n{{content}}\n\n### Response:\n")},
             {text("{{content}}"), eos(), text("\n\n")}, {}, {}, {},
             "Below is an instruction that describes a task. Write a response that appropriately "
             "completes the request.\n\n",
             {}, false, false, false));
    add(make("chatml", {text("<|im_start|>user\n{{content}}<|im_end|>\n<|im_start|>assistant\n")},
             {text("{{content}}<|im_end|>\n")}, {text("<|im_start|>system\n{{content}}<|im_end|>\n")},
             {text("<|im_start|>tool\n{{content}}<|im_end|>\n<|im_start|>assistant\n")}, {}, "",
             {"<|im_end|>", "<|im_start|>"}, false, true, false));
    add(make("default", {text("Human: {{content}}"), eos(), text("\nAssistant:")},
             {text("{{content}}"), eos(), text("\n")}, {text("System: {{content}}"), eos(), text("\n")},
             {}, {}, "", {}, false, false, false));
    add(make("empty", {}, {text("{{content}}")}, {}, {}, {}, "", {}, false, false, false));
    add(make("llama2", {bos(), text("[INST] {{content}} [/INST]")}, {},
             {text("<<SYS>>\n{{content}}\n<</SYS>>\n\n")}, {}, {}, "", {}, false, false, true));
    add(make("llama3",
             {text("<|start_header_id|>user<|end_header_id|>\n\n{{content}}<|eot_id|>"
                   "<|start_header_id|>assistant<|end_header_id|>\n\n")},
             {text("{{content}}<|eot_id|>")},
             {text("<|start_header_id|>system<|end_header_id|>\n\n{{content}}<|eot_id|>")},
             {text("<|start_header_id|>ipython<|end_header_id|>\n\n{{content}}<|eot_id|>"
                   "<|start_header_id|>assistant<|end_header_id|>\n\n")},
             {bos()}, "", {"<|eot_id|>", "<|eom_id|>"}, false, true, false,
             {text("{{content}}<|eot_id|>")}, "llama3"));
    add(make("mistral", {text("[INST] {{content}}[/INST]")}, {text(" {{content}}"), eos()},
             {text("{{content}}\n\n")},
             {text("[TOOL_RESULTS] {\"content\": {{content}}}[/TOOL_RESULTS]")}, {bos()}, "", {},
             false, false, true, {text("[TOOL_CALLS] {{content}}"), eos()}, "mistral"));
    add(make("qwen", {text("<|im_start|>user\n{{content}}<|im_end|>\n<|im_start|>assistant\n")},
             {text("{{content}}<|im_end|>\n")}, {text("<|im_start|>system\n{{content}}<|im_end|>\n")},
             {text("<|im_start|>user\n<tool_response>\n{{content}}\n</tool_response><|im_end|>\n"
                   "<|im_start|>assistant\n")},
             {}, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
             {"<|im_end|>"}, false, true, false, {text("{{content}}<|im_end|>\n")}, "qwen"));
    auto qwen3 = [&](std::string name, bool reasoning) {
      TemplateSpec t = make(std::move(name),
                            {text("<|im_start|>user\n{{content}}<|im_end|>\n<|im_start|>assistant\n")},
                            {text("{{content}}<|im_end|>\n")},
                            {text("<|im_start|>system\n{{content}}<|im_end|>\n")},
                            {text("<|im_start|>user\n<tool_response>\n{{content}}\n</tool_response><|im_end|>\n"
                                  "<|im_start|>assistant\n")},
                            {}, "", {"<|im_end|>"}, false, true, false, {text("{{content}}<|im_end|>\n")}, "qwen");
      t.reasoning = reasoning;
      return t;
    };
    add(qwen3("qwen3", true));
    add(qwen3("qwen3_nothink", false));
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

constexpr std::string_view kThoughtOpen = "<think>\n", kThoughtClose = "\n</think>\n\n";

// Template.remove_thought: re.sub(open(.*?)close, "", DOTALL).lstrip("\n").
std::string remove_thought(const std::string& content) {
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t o = content.find(kThoughtOpen, pos);
    size_t c = o == std::string::npos ? std::string::npos : content.find(kThoughtClose, o + kThoughtOpen.size());
    if (c == std::string::npos) break;
    out.append(content, pos, o - pos);
    pos = c + kThoughtClose.size();
  }
  out.append(content, pos);
  size_t first = out.find_first_not_of('\n');
  return first == std::string::npos ? std::string() : out.substr(first);
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
           "template '{}' is not known to lf-train (known: {}); set `template:` to one of them",
           name, join_names());
  spec_ = it->second;
  if (default_system) spec_.default_system = *default_system;
  if (tool_format) {
    LF_CHECK(*tool_format == "default" || *tool_format == "qwen" || *tool_format == "llama3" ||
                 *tool_format == "mistral",
             ConfigError, "tool_format '{}' is not supported (default, qwen, llama3, mistral)",
             *tool_format);
    spec_.tool_format = *tool_format;
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
  if (!spec_.reasoning) {
    encoded = encode_messages(messages_in, system, tools, origin);
  } else {
    // ReasoningTemplate.encode_multiturn.
    std::vector<Message> messages = messages_in;
    const bool discard_history_cot = mask_history && !options_.preserve_thinking;
    if (!options_.enable_thinking)
      for (size_t i = 1; i < messages.size(); i += 2) messages[i].content = remove_thought(messages[i].content);
    if (discard_history_cot)
      for (size_t i = 1; i + 2 < messages.size(); i += 2) messages[i].content = remove_thought(messages[i].content);
    encoded = encode_messages(messages, system, tools, origin);
    const std::vector<int32_t> thought_ids =
        tokenizer_.encode(std::string(kThoughtOpen) + std::string(kThoughtClose), false);
    std::vector<size_t> turns;
    if (discard_history_cot) {
      turns.push_back(messages.size() - 2);
    } else {
      for (size_t i = 0; i < messages.size(); i += 2) turns.push_back(i);
    }
    for (size_t i : turns) {
      if (i + 1 >= messages.size()) continue;
      const std::string& reply = messages[i + 1].content;
      if (reply.find("<think>") != std::string::npos || reply.find("</think>") != std::string::npos) continue;
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
        const std::string tool_text = tools.empty() ? "" : format_tools(spec_.tool_format, tools, origin);
        Slots sys = apply(spec_.format_system, {{"content", system + tool_text}});
        if (spec_.fuse_system_into_user) {
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
        turn = spec_.fuse_system_into_user
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
                     {{"content", format_function_calls(spec_.tool_format, m.content,
                                                        !spec_.fuse_system_into_user, origin)}});
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
