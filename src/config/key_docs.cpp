#include "lf/config/key_docs.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "config_schema.h"
#include "deepspeed_keys.h"
#include "fsdp_config.h"
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

const char* ds_policy(DsPolicy p) {
  switch (p) {
    case DsPolicy::kImplemented: return "implemented";
    case DsPolicy::kMatchesYaml: return "\"auto\" or the YAML's";
    case DsPolicy::kNoEffect: return "no effect (warning)";
    case DsPolicy::kRefused: return "refused";
    case DsPolicy::kIgnored: return "ignored (DeepSpeed too)";
  }
  return "?";
}

const char* fsdp_policy(FsdpPolicy p) {
  switch (p) {
    case FsdpPolicy::kImplemented: return "implemented";
    case FsdpPolicy::kNoEffect: return "no effect (warning)";
    case FsdpPolicy::kRefused: return "refused";
    case FsdpPolicy::kWrap: return "accepted, unused (one info line)";
  }
  return "?";
}

std::string schema_markdown() {
  std::string implemented =
      "| key | type or values | default | what lf-train does | observable (key-effect test) |\n|---|---|---|---|---|\n";
  std::string only = "| key | accepted values | |\n|---|---|---|\n";
  std::string refused = "| key | why |\n|---|---|\n";
  for (const KeyDecl& d : config_schema()) {
    if (d.policy == KeyPolicy::kImplemented)
      implemented += fmt::format("| `{}` | {} | {} | {} | {}{} |\n", d.name, cell(type_of(d)), shown_default(d),
                                 cell(d.note), cell(d.observable), d.ranks > 1 ? fmt::format(" ({} ranks)", d.ranks) : "");
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

std::string deepspeed_markdown() {
  std::string out = "| DeepSpeed key | in lf-train | DeepSpeed's default | |\n|---|---|---|---|\n";
  for (const DsKey& k : deepspeed_keys()) {
    if (k.type == DsType::kObject && !k.opaque) continue;  // a section: its keys are listed
    const std::string def = k.deepspeed_default.empty() ? "" : fmt::format("`{}`", k.deepspeed_default);
    std::string note(k.note);
    if (k.policy == DsPolicy::kRefused && !k.accepted.empty() && !k.opaque)
      note += fmt::format(" (accepted: `{}`{})", k.accepted, k.fp16_only ? ", under fp16" : "");
    out += fmt::format("| `{}`{} | {} | {} | {} |\n", k.path, k.opaque ? " {…}" : "", ds_policy(k.policy),
                       cell(def), cell(note));
  }
  return out;
}

std::string fsdp_markdown() {
  std::string out = "| `fsdp:` option | in lf-train | |\n|---|---|---|\n";
  for (const FsdpKey& k : fsdp_options())
    out += fmt::format("| `{}` | {} | {} |\n", k.name, fsdp_policy(k.policy), cell(k.note));
  out += "\n| `fsdp_config` key | in lf-train | HF's default | |\n|---|---|---|---|\n";
  for (const FsdpKey& k : fsdp_keys())
    out += fmt::format("| `{}` | {} | {} | {} |\n", k.name, fsdp_policy(k.policy),
                       k.hf_default.empty() ? "" : fmt::format("`{}`", cell(k.hf_default)), cell(k.note));
  return out;
}

}  // namespace

std::string config_keys_markdown() {
  return fmt::format("{}\n#### DeepSpeed keys (`deepspeed: FILE.json`)\n\n{}\n#### FSDP (`fsdp:`, `fsdp_config:`)\n\n{}",
                     schema_markdown(), deepspeed_markdown(), fsdp_markdown());
}

std::string config_keys_json() {
  nlohmann::json keys = nlohmann::json::array();
  for (const KeySpec& k : key_specs()) {
    const KeyDecl* d = find_decl(k.name);
    const KeyPolicy p = key_policy(k.name);
    nlohmann::json j = {{"name", k.name}, {"lf_type", k.type}, {"lf_default", k.default_repr},
                        {"policy", p == KeyPolicy::kImplemented  ? "implemented"
                                   : p == KeyPolicy::kOnlyValues ? "only_values"
                                   : p == KeyPolicy::kRefused    ? "refused"
                                                                 : "no_effect"}};
    if (d) j.update({{"field", d->field}, {"sample", d->sample}, {"sample_context", d->sample_context},
                     {"observable", d->observable}, {"ranks", d->ranks}, {"own", d->own}});
    keys.push_back(std::move(j));
  }
  for (const DsKey& k : deepspeed_keys()) {
    if (k.type == DsType::kObject && !k.opaque) continue;  // a section: its keys are listed
    static constexpr const char* kPolicy[] = {"implemented", "matches_yaml", "no_effect", "refused", "ignored"};
    static constexpr const char* kType[] = {"bool", "number", "int", "string", "object", "list", "any"};
    keys.push_back({{"table", "deepspeed"}, {"name", k.path}, {"policy", kPolicy[static_cast<int>(k.policy)]},
                    {"type", kType[static_cast<int>(k.type)]}, {"default", k.deepspeed_default},
                    {"accepted", k.accepted}, {"fp16_only", k.fp16_only}, {"opaque", k.opaque},
                    {"observable", k.observable}, {"sample", k.sample}, {"context", k.context},
                    {"yaml_context", k.yaml_context}});
  }
  for (const auto& [table, keys_of] : {std::pair{"fsdp", fsdp_options()}, std::pair{"fsdp_config", fsdp_keys()}})
    for (const FsdpKey& k : keys_of) {
      static constexpr const char* kPolicy[] = {"implemented", "no_effect", "refused", "wrap"};
      keys.push_back({{"table", table}, {"name", k.name}, {"policy", kPolicy[static_cast<int>(k.policy)]},
                      {"default", k.hf_default}, {"observable", k.observable}, {"sample", k.sample},
                      {"yaml_context", k.yaml_context}});
    }
  return keys.dump(1) + "\n";
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
  out += "\nDeepSpeed keys (deepspeed: FILE.json):\n";
  for (const DsKey& k : deepspeed_keys())
    if (!(k.type == DsType::kObject && !k.opaque))
      out += fmt::format("  {} [{}] {}\n", k.path, ds_policy(k.policy), k.note);
  out += "\nfsdp options and fsdp_config keys:\n";
  for (const FsdpKey& k : fsdp_options()) out += fmt::format("  fsdp: {} [{}] {}\n", k.name, fsdp_policy(k.policy), k.note);
  for (const FsdpKey& k : fsdp_keys())
    out += fmt::format("  fsdp_config.{} [{}] {}\n", k.name, fsdp_policy(k.policy), k.note);
  return out;
}

}  // namespace lf::config
