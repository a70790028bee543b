#pragma once
// Chat templates as LLaMA-Factory 0.9.5 defines them (template.py): each slot
// is encoded separately with add_special_tokens=False and the ids joined; the
// Jinja chat template is never rendered. Names: default, empty, qwen, llama3,
// mistral, alpaca, chatml, llama2.
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

struct TemplateSpec {
  std::string name;
  Slots format_user, format_assistant, format_system, format_observation, format_prefix;
  Slots format_function;               // function-call turns ({{content}} = rendered calls)
  std::string tool_format = "default";  // tool_utils name for tools and function calls
  std::string default_system;
  std::vector<std::string> stop_words;
  bool efficient_eos = false;
  bool replace_eos = false;
  bool fuse_system_into_user = false;  // LLaMA-Factory's Llama2Template
  bool reasoning = false;              // LLaMA-Factory's ReasoningTemplate (<think> handling)
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

  const TemplateSpec& spec() const { return spec_; }
  int32_t eos_id() const { return eos_id_; }
  int32_t pad_id() const { return pad_id_; }
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

}  // namespace lf
