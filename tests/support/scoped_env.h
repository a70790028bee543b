#pragma once
// One environment variable set (or, with nullptr, unset) for a scope, the old value put back at
// its end. Tests only; not thread-safe (setenv is not), so only around single-threaded code or
// before the threads that read it start. Include as "../support/scoped_env.h".
#include <cstdlib>
#include <optional>
#include <string>

namespace lf::test {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? ::setenv(name, value, 1) : ::unsetenv(name);
  }
  ~ScopedEnv() { old_ ? ::setenv(name_, old_->c_str(), 1) : ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace lf::test
