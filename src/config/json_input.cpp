#include "json_input.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

namespace lf::config {

namespace fs = std::filesystem;

namespace {

std::pair<size_t, size_t> line_col(const std::string& text, size_t byte) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

// nlohmann's message without its "[json.exception.parse_error.101] parse error at line 3, column 5: " prefix.
std::string parse_reason(const std::string& what) {
  auto colon = what.find(": ");
  return colon == std::string::npos ? what : what.substr(colon + 2);
}

// `context` says where the file was named ("cfg.yaml:4: `deepspeed`").
nlohmann::json parse_json_text(const std::string& text, const std::string& label, const std::string& context) {
  // One set of keys per open object: a repeated key is an error (DeepSpeed's loader refuses it),
  // not a silent "the last one wins".
  std::vector<std::set<std::string>> open;
  std::string duplicate;
  auto callback = [&](int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) open.emplace_back();
    if (event == E::object_end && !open.empty()) open.pop_back();
    if (event == E::key && !open.empty() && !open.back().insert(parsed.get<std::string>()).second &&
        duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  nlohmann::json v;
  try {
    v = nlohmann::json::parse(text, callback);
  } catch (const nlohmann::json::parse_error& e) {
    auto [line, col] = line_col(text, e.byte == 0 ? 0 : e.byte - 1);
    LF_THROW(ConfigError, "{}: {}:{}:{}: invalid JSON: {}", context, label, line, col, parse_reason(e.what()));
  }
  LF_CHECK(duplicate.empty(), ConfigError, "{}: {}: the key \"{}\" appears twice in one object: keep one", context,
           label, duplicate);
  return v;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  LF_CHECK(in, ConfigError, "cannot read '{}': {}", p.string(), std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

[[noreturn]] void not_found(const Reader& r, const std::string& key, const std::string& given,
                            const std::string& config_dir) {
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  std::string hint;
  const fs::path beside = fs::path(config_dir) / given;
  if (!config_dir.empty() && fs::path(given).is_relative() && fs::is_regular_file(beside, ec))
    hint = fmt::format("; '{}' exists beside the config: run from {} or give that path", beside.string(),
                       fs::absolute(config_dir, ec).string());
  LF_THROW(ConfigError,
           "{}: `{}: {}`: no such file{}. A relative path is resolved against the working directory ({}), as "
           "LLaMA-Factory and HF do{}",
           r.where(key), key, given, fs::path(given).is_relative() ? " '" + (cwd / given).string() + "'" : "",
           cwd.string(), hint);
}

}  // namespace

JsonInput read_json_input(const Reader& r, const std::string& key, const std::string& config_dir) {
  const YAML::Node& n = r.node(key);
  JsonInput in;
  if (n.IsMap()) {
    in.value = yaml_to_json(n);
    in.label = "(inline mapping)";
    return in;
  }
  LF_CHECK(n.IsScalar(), ConfigError, "{}: `{}` must be a path to a JSON file or a mapping, got '{}'", r.where(key),
           key, r.text(key));
  in.label = n.Scalar();
  const fs::path p(in.label);
  std::error_code ec;
  if (!fs::exists(p, ec)) not_found(r, key, in.label, config_dir);
  LF_CHECK(!fs::is_directory(p, ec), ConfigError, "{}: `{}: {}` is a folder, not a JSON file", r.where(key), key,
           in.label);
  in.path = p.string();
  in.value = parse_json_text(read_file(p), in.label, fmt::format("{}: `{}`", r.where(key), key));
  LF_CHECK(in.value.is_object(), ConfigError, "{}: `{}: {}`: expected a JSON object ({{...}}), got {}", r.where(key),
           key, in.label, json_text(in.value).substr(0, 80));
  return in;
}

nlohmann::json yaml_to_json(const YAML::Node& n) {
  if (n.IsMap()) {
    nlohmann::json o = nlohmann::json::object();
    for (const auto& kv : n) o[kv.first.as<std::string>()] = yaml_to_json(kv.second);
    return o;
  }
  if (n.IsSequence()) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& item : n) a.push_back(yaml_to_json(item));
    return a;
  }
  if (n.IsNull()) return nullptr;
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted: text
  bool b = false;
  if (YAML::convert<bool>::decode(n, b)) return b;
  int64_t i = 0;
  if (YAML::convert<int64_t>::decode(n, i)) return i;
  double d = 0;
  if (YAML::convert<double>::decode(n, d)) return d;
  return s;
}

std::string json_text(const nlohmann::json& v) { return v.dump(); }

}  // namespace lf::config
