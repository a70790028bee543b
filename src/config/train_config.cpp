#include "lf/config/train_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config_reader.h"
#include "config_rules.h"
#include "config_schema.h"
#include "did_you_mean.h"
#include "key_table.h"
#include "report_to.h"
#include "lf/common/error.h"
#include "plan_knobs.h"
#include "sharding.h"

namespace lf::config {

namespace {

// The YAML file's keys, then the overrides (which win), each with where it was set.
Entries read_entries(const std::string& yaml_text, const std::vector<std::string>& overrides,
                     const std::string& source_name) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    LF_THROW(ConfigError, "{}:{}:{}: malformed YAML: {}", source_name, e.mark.line + 1, e.mark.column + 1, e.msg);
  }
  LF_CHECK(root.IsNull() || root.IsMap(), ConfigError, "{}: expected a mapping of `key: value` lines at the top level",
           source_name);
  Entries entries;
  if (root.IsMap())
    for (const auto& kv : root) {
      const auto key = kv.first.as<std::string>();
      const auto where = fmt::format("{}:{}", source_name, kv.first.Mark().line + 1);
      // YAML leaves a repeated key to the reader (yaml-cpp keeps both, PyYAML the last): say so, as
      // the DeepSpeed reader does, rather than train on whichever value came last.
      LF_CHECK(!entries.count(key), ConfigError, "{}: `{}` is given twice (first at {}): keep one", where, key,
               entries[key].where);
      entries[key] = {kv.second, where};
    }
  for (const auto& o : overrides) {
    auto eq = o.find('=');
    LF_CHECK(eq != std::string::npos && eq > 0, ConfigError,
             "override '{}' is not key=value (e.g. learning_rate=1e-4)", o);
    YAML::Node value;
    try {
      value = YAML::Load(o.substr(eq + 1));
    } catch (const YAML::Exception& e) {
      LF_THROW(ConfigError, "override '{}': malformed value: {}", o, e.msg);
    }
    entries[o.substr(0, eq)] = {value, fmt::format("override {}", o)};
  }
  return entries;
}

// Unknown keys, refused values and keys without effect: every problem at once.
void check_policies(const Entries& entries, std::vector<std::string>& warnings, std::vector<std::string>& notes) {
  std::vector<std::string> problems;
  for (const auto& [key, entry] : entries) {
    const KeySpec* spec = find_key(key);
    if (!spec) {
      auto near = did_you_mean(key, known_keys());
      problems.push_back(fmt::format("{}: unknown key `{}`{}", entry.where, key,
                                     near.empty() ? std::string(" (not a LLaMA-Factory or lf-train key)")
                                                  : fmt::format(": did you mean {}?", fmt::join(near, ", "))));
      continue;
    }
    const std::string text = scalar_text(entry.value);
    if (equals_python_default(text, spec->default_repr)) continue;
    const KeyDecl* decl = find_decl(key);
    switch (key_policy(key)) {
      case KeyPolicy::kImplemented:
      case KeyPolicy::kOnlyValues:  // their own checks say more (config_rules.cpp)
        break;
      case KeyPolicy::kRefused:
        problems.push_back(fmt::format("{}: `{}: {}` is refused: {}", entry.where, key, text, decl->note));
        break;
      case KeyPolicy::kNoEffect:
        if (key == "enable_liger_kernel" || key == "use_unsloth") {  // asks for what lf-train does anyway
          notes.push_back(fmt::format("{}: `{}: {}`: lf-train's own fused kernels (RMSNorm, RoPE, SwiGLU) are always "
                                      "on where a GPU runs; nothing to enable", entry.where, key, text));
          break;
        }
        warnings.push_back(fmt::format("{}: `{}: {}` has no effect in lf-train ({})", entry.where, key, text,
                                       decl && !decl->note.empty() ? decl->note
                                                                   : "accepted for LLaMA-Factory compatibility"));
        break;
    }
  }
  LF_CHECK(problems.empty(), ConfigError, "{} problem{} in the config:\n  {}", problems.size(),
           problems.size() == 1 ? "" : "s", fmt::join(problems, "\n  "));
}

}  // namespace

const std::vector<std::string>& known_keys() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& k : key_specs()) v.push_back(k.name);
    return v;
  }();
  return names;
}

LoadedConfig parse_train_config(const std::string& yaml_text, const std::vector<std::string>& overrides,
                                const std::string& source_name) {
  const Entries entries = read_entries(yaml_text, overrides, source_name);
  LoadedConfig out;
  check_policies(entries, out.warnings, out.notes);
  const Reader reader(entries);
  for (const KeyDecl& d : config_schema())
    if (d.read) d.read(reader, out.plan);
  check_config(reader, out.plan);
  resolve_report_to(reader, out);
  for (const auto& [key, entry] : entries) {
    out.items.emplace_back(key, scalar_text(entry.value));  // the rendezvous names the keys that differ
    out.canonical += key + "=" + out.items.back().second + "\n";
  }
  resolve_sharding(reader, std::filesystem::path(source_name).parent_path().string(), out);
  check_parallel_rules(out.plan);
  resolve_plan_knobs(out.plan);
  return out;
}

LoadedConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path);
  LF_CHECK(in, ConfigError, "cannot read config '{}': {}", path, std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_train_config(ss.str(), overrides, path);
}

}  // namespace lf::config
