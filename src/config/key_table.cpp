#include "key_table.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>
#include <stdexcept>

#include "config_schema.h"
#include "llamafactory_keys.inc"  // kLlamaFactoryKeysTsv, generated from llamafactory_keys.tsv

namespace lf::config {

namespace {

// Python's repr of an own key's default, as the generated table spells LLaMA-Factory's.
std::string python_repr(const KeyDecl& d) {
  const std::string v = default_text(d);
  if (v.empty() || v == "null") return "None";
  if (d.type == "bool") return v == "true" ? "True" : "False";
  char* end = nullptr;
  std::strtod(v.c_str(), &end);
  return end && *end == '\0' ? v : "'" + v + "'";
}

std::vector<KeySpec> parse_table() {
  std::vector<KeySpec> out;
  std::istringstream in(kLlamaFactoryKeysTsv);
  std::string line;
  bool header_seen = false;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    // Exactly the header, then rows of four fields: anything else is a broken generation (a
    // log line once took the header's place, and the header became a key named "name").
    if (!header_seen) {
      if (line != "name\tdataclass\ttype\tdefault")
        throw std::logic_error("llamafactory_keys.tsv: expected the header line, got: " + line);
      header_seen = true;
      continue;
    }
    KeySpec k;
    std::istringstream fields(line);
    std::getline(fields, k.name, '\t');
    std::getline(fields, k.dataclass, '\t');
    std::getline(fields, k.type, '\t');
    if (!std::getline(fields, k.default_repr) || k.name.empty())
      throw std::logic_error("llamafactory_keys.tsv: a row without four tab-separated fields: " + line);
    out.push_back(std::move(k));
  }
  for (const KeyDecl& d : config_schema())
    if (d.own) out.push_back({d.name, "lf-train", d.type, python_repr(d)});
  std::sort(out.begin(), out.end(), [](const KeySpec& a, const KeySpec& b) { return a.name < b.name; });
  return out;
}

std::string strip_quotes(const std::string& s) {
  if (s.size() >= 2 && (s.front() == '\'' || s.front() == '"') && s.back() == s.front()) return s.substr(1, s.size() - 2);
  // Enum reprs: <AttentionFunction.AUTO: 'auto'>
  auto colon = s.find(": '");
  if (s.rfind("<", 0) == 0 && colon != std::string::npos) return s.substr(colon + 3, s.size() - colon - 5);
  return s;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

const std::vector<KeySpec>& key_specs() {
  static const std::vector<KeySpec> table = parse_table();
  return table;
}

const KeySpec* find_key(std::string_view name) {
  const auto& t = key_specs();
  auto it = std::lower_bound(t.begin(), t.end(), name, [](const KeySpec& k, std::string_view n) { return k.name < n; });
  return it != t.end() && it->name == name ? &*it : nullptr;
}

bool equals_python_default(const std::string& yaml_value, const std::string& default_repr) {
  std::string v = lower(yaml_value);
  std::string d = strip_quotes(default_repr);
  if (default_repr == "None") return v.empty() || v == "null" || v == "~" || v == "none";
  if (default_repr == "True" || default_repr == "False") return v == lower(default_repr);
  if (default_repr == "[]" || default_repr == "{}") return v.empty() || v == default_repr;
  char* end = nullptr;
  double dv = std::strtod(d.c_str(), &end);
  if (!d.empty() && end && *end == '\0') {
    char* vend = nullptr;
    double vv = std::strtod(v.c_str(), &vend);
    return !v.empty() && vend && *vend == '\0' && vv == dv;
  }
  return v == lower(d);
}

}  // namespace lf::config
