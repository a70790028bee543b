#include "tool_format.h"

#include <fmt/format.h>

#include <ctime>
#include <mutex>

#include "lf/common/error.h"

namespace lf {
namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view kDefaultToolPrompt =
    "You have access to the following tools:\n{tool_text}"
    "Use the following format if using a tool:\n"
    "```\n"
    "Action: tool name (one of [{tool_names}])\n"
    "Action Input: the input to the tool, in a JSON format representing the kwargs "
    "(e.g. ```{{\"input\": \"hello world\", \"num_beams\": 5}}```)\n"
    "```\n";

constexpr std::string_view kLlama3ToolPrompt =
    "Cutting Knowledge Date: December 2023\nToday Date: {date}\n\n"
    "You have access to the following functions. To call a function, please respond with JSON for a "
    "function call. Respond in the format {{\"name\": function name, \"parameters\": dictionary of "
    "argument name and its value}}. Do not use variables.\n\n{tool_text}";

constexpr std::string_view kQwenToolPrompt =
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>{tool_text}"
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n{{\"name\": <function-name>, "
    "\"arguments\": <args-json-object>}}\n</tool_call>";


std::mutex g_date_mu;
std::string g_date;

std::string today() {
  std::lock_guard lock(g_date_mu);
  if (!g_date.empty()) return g_date;
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%d %b %Y", &tm);
  return buf;
}

void dump(const ojson& v, int indent, int depth, std::string& out) {
  auto newline = [&](int d) {
    out += '\n';
    out.append(static_cast<size_t>(indent * d), ' ');
  };
  if (v.is_object()) {
    if (v.empty()) {
      out += "{}";
      return;
    }
    out += '{';
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!first) out += indent >= 0 ? "," : ", ";
      first = false;
      if (indent >= 0) newline(depth + 1);
      out += ojson(it.key()).dump(-1, ' ', false, ojson::error_handler_t::replace);
      out += ": ";
      dump(it.value(), indent, depth + 1, out);
    }
    if (indent >= 0) newline(depth);
    out += '}';
  } else if (v.is_array()) {
    if (v.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    bool first = true;
    for (const auto& e : v) {
      if (!first) out += indent >= 0 ? "," : ", ";
      first = false;
      if (indent >= 0) newline(depth + 1);
      dump(e, indent, depth + 1, out);
    }
    if (indent >= 0) newline(depth);
    out += ']';
  } else if (v.is_boolean()) {
    out += v.get<bool>() ? "true" : "false";
  } else if (v.is_null()) {
    out += "null";
  } else {
    // Strings escape as Python's ensure_ascii=False does; numbers use the
    // shortest round-trip form ("1.0", "1e-05") like Python's repr.
    out += v.dump(-1, ' ', false, ojson::error_handler_t::replace);
  }
}

ojson parse(const std::string& text, const std::string& origin, const char* what) {
  try {
    return ojson::parse(text);
  } catch (const ojson::parse_error& e) {
    LF_THROW(ConfigError, "{}: {} is not valid JSON: {}", origin, what, e.what());
  }
}

ojson wrap_function(const ojson& tool) {
  if (tool.is_object() && tool.value("type", "") == "function") return tool;
  ojson w;
  w["type"] = "function";
  w["function"] = tool;
  return w;
}

std::string python_str(const ojson& v) {
  return v.is_string() ? v.get<std::string>() : python_json_dumps(v);
}

std::string default_tools(const ojson& tools, const std::string& origin) {
  std::string tool_text, tool_names;
  for (ojson tool : tools) {
    if (tool.is_object() && tool.value("type", "") == "function") tool = tool.value("function", ojson(""));
    LF_CHECK(tool.is_object() && tool.contains("name") && tool.contains("parameters"), ConfigError,
             "{}: each tool needs \"name\" and \"parameters\"", origin);
    std::string param_text;
    const ojson& params = tool["parameters"];
    ojson required = params.value("required", ojson::array());
    for (auto it = params["properties"].begin(); it != params["properties"].end(); ++it) {
      const ojson& p = it.value();
      std::string req, en, items;
      for (const auto& r : required)
        if (r == it.key()) req = ", required";
      if (p.contains("enum") && !p["enum"].empty()) {
        std::string joined;
        for (const auto& e : p["enum"]) joined += (joined.empty() ? "" : ", ") + python_str(e);
        en = fmt::format(", should be one of [{}]", joined);
      }
      if (p.contains("items") && !p["items"].is_null() && !p["items"].empty())
        items = fmt::format(", where each item should be {}", python_str(p["items"].value("type", ojson(""))));
      param_text += fmt::format("  - {} ({}{}): {}{}{}\n", it.key(), python_str(p.value("type", ojson(""))),
                                req, python_str(p.value("description", ojson(""))), en, items);
    }
    tool_text += fmt::format("> Tool Name: {}\nTool Description: {}\nTool Args:\n{}\n",
                             python_str(tool["name"]), python_str(tool.value("description", ojson(""))),
                             param_text);
    tool_names += (tool_names.empty() ? "" : ", ") + python_str(tool["name"]);
  }
  return fmt::format(fmt::runtime(kDefaultToolPrompt), fmt::arg("tool_text", tool_text),
                     fmt::arg("tool_names", tool_names));
}

struct FunctionCall {
  std::string name;
  std::string arguments;  // json.dumps(arguments)
};

std::vector<FunctionCall> parse_functions(const std::string& text, const std::string& origin) {
  ojson calls = parse(text, origin, "function_call content");
  if (!calls.is_array()) calls = ojson::array({calls});
  std::vector<FunctionCall> out;
  for (const auto& c : calls) {
    LF_CHECK(c.is_object() && c.contains("name") && c.contains("arguments"), ConfigError,
             "{}: a function call needs \"name\" and \"arguments\"", origin);
    out.push_back({python_str(c["name"]), python_json_dumps(c["arguments"])});
  }
  return out;
}

std::string render_calls(const std::string& fmt_name, const std::vector<FunctionCall>& calls,
                         const std::string& origin) {
  if (fmt_name == "default") {
    std::string s;
    for (const auto& c : calls) s += (s.empty() ? "" : "\n") + fmt::format("Action: {}\nAction Input: {}", c.name, c.arguments);
    return s;
  }
  if (fmt_name == "qwen") {
    std::string s;
    for (const auto& c : calls) {
      ojson o;
      o["name"] = c.name;
      o["arguments"] = ojson::parse(c.arguments);
      s += (s.empty() ? "" : "\n") + std::string("<tool_call>\n") + python_json_dumps(o) + "\n</tool_call>";
    }
    return s;
  }
  if (fmt_name == "llama3" || fmt_name == "mistral") {
    const char* key = fmt_name == "llama3" ? "parameters" : "arguments";
    ojson list = ojson::array();
    for (const auto& c : calls) {
      ojson o;
      o["name"] = c.name;
      o[key] = ojson::parse(c.arguments);
      list.push_back(o);
    }
    if (fmt_name == "llama3" && list.size() == 1) return python_json_dumps(list[0]);
    return python_json_dumps(list);
  }
  LF_THROW(ConfigError,
           "{}: tool format '{}' is not supported by lf-train yet (default, qwen, llama3, mistral); "
           "set tool_format: to one of them or drop tool calls from the data",
           origin, fmt_name);
}

// re.search(re.escape(open) + "(.*?)" + re.escape(close), DOTALL): first match.
bool find_between(const std::string& s, std::string_view open, std::string_view close, size_t& b,
                  size_t& e, std::string& inner) {
  size_t o = s.find(open);
  if (o == std::string::npos) return false;
  size_t c = s.find(close, o + open.size());
  if (c == std::string::npos) return false;
  b = o;
  e = c + close.size();
  inner = s.substr(o + open.size(), c - o - open.size());
  return true;
}

// Python str.replace(old, new): every occurrence.
std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out += to;
  }
  out.append(s, pos);
  return out;
}

}  // namespace

void set_tool_prompt_date(const std::string& date) {
  std::lock_guard lock(g_date_mu);
  g_date = date;
}

std::string python_json_dumps(const ojson& value, int indent) {
  std::string out;
  dump(value, indent, 0, out);
  return out;
}

std::string format_tools(const std::string& tool_format, const std::string& tools_json,
                         const std::string& origin) {
  ojson tools = parse(tools_json, origin, "the tools column");
  if (tools.empty()) return "";
  LF_CHECK(tools.is_array(), ConfigError, "{}: the tools column must be a JSON list", origin);
  if (tool_format == "default") return default_tools(tools, origin);
  if (tool_format == "qwen") {
    std::string text;
    for (const auto& t : tools) text += "\n" + python_json_dumps(wrap_function(t));
    return fmt::format(fmt::runtime(kQwenToolPrompt), fmt::arg("tool_text", text));
  }
  if (tool_format == "llama3") {
    std::string text;
    for (const auto& t : tools) text += python_json_dumps(wrap_function(t), 4) + "\n\n";
    return fmt::format(fmt::runtime(kLlama3ToolPrompt), fmt::arg("date", today()), fmt::arg("tool_text", text));
  }
  if (tool_format == "mistral") {
    ojson wrapped = ojson::array();
    for (const auto& t : tools) wrapped.push_back(wrap_function(t));
    return "[AVAILABLE_TOOLS] " + python_json_dumps(wrapped) + "[/AVAILABLE_TOOLS]";
  }
  LF_THROW(ConfigError,
           "{}: tool format '{}' is not supported by lf-train yet (default, qwen, llama3, mistral); "
           "set tool_format: to one of them or drop the tools column",
           origin, tool_format);
}

std::string format_function_calls(const std::string& tool_format, const std::string& content,
                                  bool parse_words, const CallWords& words, const std::string& origin) {
  size_t b, e;
  std::string inner;
  if (parse_words && find_between(content, words.call_open, words.call_close, b, e, inner)) {
    std::string thought = replace_all(content, content.substr(b, e - b), "");
    return thought + render_calls(tool_format, parse_functions(inner, origin), origin);
  }
  std::string json_part = content, thought;
  if (parse_words && find_between(content, words.thought_open, words.thought_close, b, e, inner)) {
    thought = content.substr(b, e - b);
    json_part = replace_all(content, thought, "");
  }
  return thought + render_calls(tool_format, parse_functions(json_part, origin), origin);
}

}  // namespace lf
