#include "lf/common/env.h"

#include <cmath>
#include <cstdlib>

#include "lf/common/error.h"

extern char** environ;

namespace lf {

std::optional<std::string> env_string(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

std::optional<int64_t> env_int(const char* name) {
  auto s = env_string(name);
  if (!s) return std::nullopt;
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(*s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  LF_CHECK(used == s->size(), ConfigError, "environment variable {}='{}' is not an integer", name, *s);
  return v;
}

std::optional<double> env_double(const char* name) {
  auto s = env_string(name);
  if (!s) return std::nullopt;
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(*s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  LF_CHECK(used == s->size() && std::isfinite(v), ConfigError, "environment variable {}='{}' is not a number", name,
           *s);
  return v;
}

std::map<std::string, std::string> environment_map() {
  std::map<std::string, std::string> out;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    auto eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    out.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return out;
}

}  // namespace lf
