#pragma once
// Reading environment variables with a typed, named error on bad values.
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace lf {

std::optional<std::string> env_string(const char* name);
// Throws ConfigError naming the variable when the value is not an integer.
std::optional<int64_t> env_int(const char* name);
// Throws ConfigError naming the variable when the value is not a finite number.
std::optional<double> env_double(const char* name);

// The whole environment of this process, as name -> value.
std::map<std::string, std::string> environment_map();

}  // namespace lf
