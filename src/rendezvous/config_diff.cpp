#include "lf/rendezvous/config_diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "lf/common/hash.h"

namespace lf::rdzv {

namespace {

bool looks_secret(const std::string& key) {
  for (const char* word : {"token", "password", "secret"})
    if (key.find(word) != std::string::npos) return true;
  return false;
}

std::map<std::string, std::string> by_key(const std::vector<std::string>& items) {
  std::map<std::string, std::string> out;
  for (const auto& item : items) {
    const auto eq = item.find('=');
    out[item.substr(0, eq)] = eq == std::string::npos ? std::string() : item.substr(eq + 1);
  }
  return out;
}

// Long values (a system prompt, a whole command line) are cut: the key is what helps.
std::string shown(const std::string& v) {
  constexpr size_t kMax = 120;
  std::string s = v.size() > kMax ? v.substr(0, kMax) + "..." : v;
  std::replace(s.begin(), s.end(), '\n', ' ');
  return "'" + s + "'";
}

}  // namespace

std::string config_item(const std::string& key, const std::string& value) {
  return key + "=" + (looks_secret(key) ? "<secret, digest " + hex64(fnv1a64(value)) + ">" : value);
}

std::string describe_config_difference(const std::vector<std::string>& a, const std::string& a_name,
                                       const std::vector<std::string>& b, const std::string& b_name,
                                       size_t max_keys) {
  const auto ka = by_key(a), kb = by_key(b);
  std::vector<std::string> keys;
  for (const auto& [k, v] : ka)
    if (!kb.count(k) || kb.at(k) != v) keys.push_back(k);
  for (const auto& [k, v] : kb)
    if (!ka.count(k)) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  std::string out;
  for (size_t i = 0; i < keys.size() && i < max_keys; ++i) {
    const auto& k = keys[i];
    auto value = [&](const std::map<std::string, std::string>& m) {
      if (!m.count(k)) return std::string("(not set)");
      return looks_secret(k) ? std::string("(a different secret)") : shown(m.at(k));
    };
    out += fmt::format("{}{}: {} on {} vs {} on {}", i ? "; " : "", k, value(ka), a_name, value(kb), b_name);
  }
  if (keys.size() > max_keys) out += fmt::format("; and {} more key(s)", keys.size() - max_keys);
  return out;
}

}  // namespace lf::rdzv
