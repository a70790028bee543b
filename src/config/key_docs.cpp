#include "lf/config/key_docs.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config_schema.h"
#include "key_table.h"

namespace lf::config {

namespace {

// Markdown table cells hold `|` only escaped.
std::string cell(std::string_view s) {
  std::string out;
  for (char ch : s) {
    if (ch == '|') out += '\\';
    out += ch;
  }
  return out;
}

std::string shown_default(const KeyDecl& d) {
  const std::string v = default_text(d);
  return v.empty() || v == "null" ? "unset" : fmt::format("`{}`", v);
}

std::string type_of(const KeyDecl& d) {
  return d.choices.empty() ? d.type : fmt::format("{}", fmt::join(d.choices, " | "));
}

std::vector<std::string> undeclared_keys() {
  std::vector<std::string> out;
  for (const KeySpec& k : key_specs())
    if (key_policy(k.name) == KeyPolicy::kNoEffect) out.push_back(k.name);
  return out;
}

std::string schema_markdown() {
  std::string implemented =
      "| key | type or values | default | what lf-train does |\n|---|---|---|---|\n";
  std::string only = "| key | accepted values | |\n|---|---|---|\n";
  std::string refused = "| key | why |\n|---|---|\n";
  for (const KeyDecl& d : config_schema()) {
    if (d.policy == KeyPolicy::kImplemented)
      implemented += fmt::format("| `{}` | {} | {} | {} |\n", d.name, cell(type_of(d)), shown_default(d), cell(d.note));
    if (d.policy == KeyPolicy::kOnlyValues)
      only += fmt::format("| `{}` | {} | {} |\n", d.name, fmt::join(d.choices, ", "), cell(d.note));
    if (d.policy == KeyPolicy::kRefused) refused += fmt::format("| `{}` | {} |\n", d.name, cell(d.note));
  }
  const auto no_effect = undeclared_keys();
  std::vector<std::string> quoted;
  for (const auto& k : no_effect) quoted.push_back("`" + k + "`");
  return fmt::format(
      "**Implemented** (lf-train's own keys say so):\n\n{}\n"
      "**Accepted only with these values** (what lf-train does anyway; another value is an error):\n\n{}\n"
      "**Refused** when set to anything but the default, because ignoring it would change what is trained:\n\n{}\n"
      "**Accepted without effect**: a value other than the default gets one warning line.\n\n"
      "<details><summary>{} keys</summary>\n\n{}\n\n</details>\n",
      implemented, only, refused, no_effect.size(), fmt::join(quoted, ", "));
}

}  // namespace

std::string config_keys_markdown() {
  return schema_markdown();
}

std::string config_keys_text() {
  std::string out;
  for (const KeyDecl& d : config_schema()) {
    const char* policy = d.policy == KeyPolicy::kImplemented ? "implemented"
                         : d.policy == KeyPolicy::kOnlyValues ? "only these values"
                         : d.policy == KeyPolicy::kRefused    ? "refused unless default"
                                                               : "no effect";
    out += fmt::format("{} [{}{}]{}\n", d.name, policy, d.own ? ", lf-train's own" : "",
                       d.policy == KeyPolicy::kImplemented || d.policy == KeyPolicy::kOnlyValues
                           ? fmt::format(" {} (default {})", type_of(d), shown_default(d))
                           : std::string());
    if (!d.note.empty()) out += "    " + d.note + "\n";
  }
  out += fmt::format("no effect (a warning when set): {}\n", fmt::join(undeclared_keys(), ", "));
  return out;
}

}  // namespace lf::config
