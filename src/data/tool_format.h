#pragma once
// LLaMA-Factory's tool-calling text (tool_utils.py: default, qwen, llama3,
// mistral formats): the tool list appended to the system prompt and the
// assistant's function-call turns, byte-identical to what its Python renders,
// including json.dumps' spacing and key order.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace lf {

// Python's json.dumps(value, ensure_ascii=False[, indent=N]).
std::string python_json_dumps(const nlohmann::ordered_json& value, int indent = -1);

// ToolFormatter.apply: `tools_json` is the dataset's tools column (a JSON list).
std::string format_tools(const std::string& tool_format, const std::string& tools_json,
                         const std::string& origin);

// FunctionFormatter.apply's text (before slot substitution) for a function-call
// turn whose content is JSON ({"name", "arguments"} or a list of them).
// `parse_words`: Template passes its thought/tool-call words, Llama2Template
// does not.
struct CallWords {
  std::string thought_open, thought_close, call_open, call_close;
};
std::string format_function_calls(const std::string& tool_format, const std::string& content,
                                  bool parse_words, const CallWords& words, const std::string& origin);

// Llama-3's tool prompt embeds today's date ("%d %b %Y") as LLaMA-Factory does;
// tests pin it. Empty restores the clock.
void set_tool_prompt_date(const std::string& date);

}  // namespace lf
