#pragma once
// Chat templates as LLaMA-Factory 0.9.5 defines them (template.py): each slot
// is encoded separately with add_special_tokens=False and the ids joined; the
// Jinja chat template is never rendered. The 118 definitions are generated from
// LLaMA-Factory's own TEMPLATES (template_registry.inc); ids and labels are
// checked against LLaMA-Factory for 50 of them (tests/fixtures/data/reference.jsonl),
// including qwen, qwen3, llama3, mistral, default and empty with their own tokenizers.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lf/data/example.h"
#include "lf/tokenizer/tokenizer.h"

namespace lf {

struct Slot {
  enum class Kind { kText, kBos, kEos, kToken };
  Kind kind = Kind::kText;
  std::string text;  // kText: may hold {{content}} / {{idx}}; kToken: the token
};
using Slots = std::vector<Slot>;

// LLaMA-Factory's template classes that change encoding.
enum class TemplateKind {
  kPlain,      // Template
  kLlama2,     // Llama2Template: system fused into the first user turn
  kReasoning,  // ReasoningTemplate: <think> handling, enable_thinking
};

struct TemplateSpec {
  std::string name;
  Slots format_user, format_assistant, format_system, format_observation, format_prefix;
  Slots format_function;               // function-call turns ({{content}} = rendered calls)
  std::string tool_format = "default";   // tool_utils name for function calls
  std::string tools_format = "default";  // tool_utils name for the tool list
  std::string default_system;
  std::vector<std::string> stop_words;
  std::string thought_open = "<think>\n", thought_close = "\n</think>\n\n";
  std::string tool_call_open = "<tool_call>", tool_call_close = "</tool_call>";
  bool efficient_eos = false;
  bool replace_eos = false;
  bool replace_jinja_template = false;  // LLaMA-Factory writes its own Jinja template over the tokenizer's
  TemplateKind kind = TemplateKind::kPlain;
};

// The YAML keys that adjust a template (LLaMA-Factory's DataArguments).
struct TemplateOptions {
  std::optional<std::string> default_system;
  // Swaps the tool/function formatters; function slots become "{{content}}" + eos.
  std::optional<std::string> tool_format;
  bool enable_thinking = true;     // reasoning templates: train on (empty) thoughts
  bool preserve_thinking = false;  // reasoning templates: keep history thoughts with mask_history
};

class ChatTemplate {
 public:
  // Resolves the template and the special tokens the way
  // get_template_and_fix_tokenizer does (replace_eos, eos/pad fallbacks).
  // Throws ConfigError for an unknown name (listing the known ones).
  ChatTemplate(const std::string& name, const Tokenizer& tokenizer, const TemplateOptions& options = {});

  // (source_ids, target_ids) per turn, like Template.encode_multiturn. `tools`
  // is the dataset's tools JSON ("" for none); `origin` names the record in errors.
  // `mask_history` drops history thoughts in reasoning templates unless
  // preserve_thinking (LLaMA-Factory's discarding_history_cot).
  std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> encode_multiturn(
      const std::vector<Message>& messages, const std::string& system, const std::string& tools = "",
      const std::string& origin = "", bool mask_history = false) const;

  // (prompt_ids, response_ids) of the whole conversation, like Template.encode_oneturn (and
  // ReasoningTemplate's): every turn but the last is the prompt. The preference processors'
  // encoding (pairwise.h).
  std::pair<std::vector<int32_t>, std::vector<int32_t>> encode_oneturn(const std::vector<Message>& messages,
                                                                       const std::string& system,
                                                                       const std::string& tools = "",
                                                                       const std::string& origin = "") const;

  const TemplateSpec& spec() const { return spec_; }
  int32_t eos_id() const { return eos_id_; }
  int32_t pad_id() const { return pad_id_; }
  std::optional<int32_t> bos_id() const { return bos_id_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }

  static std::vector<std::string> names();

 private:
  std::vector<int32_t> to_ids(const Slots& slots) const;

  std::vector<std::vector<int32_t>> encode_messages(const std::vector<Message>& messages,
                                                    const std::string& system, const std::string& tools,
                                                    const std::string& origin) const;

  TemplateSpec spec_;
  TemplateOptions options_;
  Tokenizer tokenizer_;
  int32_t eos_id_ = -1;
  int32_t pad_id_ = -1;
  std::optional<int32_t> bos_id_;
};

// The Jinja chat template LLaMA-Factory's fix_jinja_template gives the tokenizer it saves
// (Template._get_jinja_template, or Llama2Template's), for `tmpl` and its tokenizer's fixed
// special tokens. nullopt where LLaMA-Factory cannot build one (a slot holding a token id: it
// then keeps the tokenizer's own). jinja_template.cpp.
std::optional<std::string> llamafactory_jinja_template(const ChatTemplate& tmpl);

}  // namespace lf
