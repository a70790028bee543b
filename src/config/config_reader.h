#pragma once
// The config's key/value entries (YAML file + `key=value` overrides, each with where
// it came from) and typed reads with one message format: key, where, what was
// expected, what was seen. Internal to src/config.
#include <yaml-cpp/yaml.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lf/common/error.h"

namespace lf::config {

struct Entry {
  YAML::Node value;
  std::string where;  // "config.yaml:12" or "override key=value"
};

using Entries = std::map<std::string, Entry>;

// A node as the user wrote it: a scalar's text, "" for null, flow YAML for the rest.
std::string scalar_text(const YAML::Node& n);

class Reader {
 public:
  explicit Reader(const Entries& entries) : entries_(entries) {}

  // Given, and not null.
  bool has(const std::string& key) const { return entries_.count(key) && !entries_.at(key).value.IsNull(); }
  const YAML::Node& node(const std::string& key) const { return entries_.at(key).value; }
  std::string text(const std::string& key) const { return has(key) ? scalar_text(node(key)) : std::string(); }
  std::string where(const std::string& key) const { return has(key) ? entries_.at(key).where : "default"; }
  // "cfg.yaml:12: `key: value`" for messages that name a given key and its value.
  std::string quote(const std::string& key) const;

  template <typename T>
  void read(const std::string& key, T& out, const char* expected) const {
    if (!has(key)) return;
    try {
      out = node(key).as<T>();
    } catch (const YAML::Exception&) {
      LF_THROW(ConfigError, "{}: `{}` must be {}, got '{}'", where(key), key, expected, text(key));
    }
  }

  template <typename T>
  void read_optional(const std::string& key, std::optional<T>& out, const char* expected) const {
    if (!has(key)) return;
    T v{};
    read(key, v, expected);
    out = v;
  }

  // "a,b" or [a, b] -> {"a", "b"} (LLaMA-Factory splits on commas and strips each item).
  void read_list(const std::string& key, std::vector<std::string>& out) const;

 private:
  const Entries& entries_;
};

}  // namespace lf::config
