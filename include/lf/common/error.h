#pragma once
// Typed errors. Every error says what was expected, what was seen, where, and
// what to try; LF_CHECK adds file:line. main() maps the type to an exit code.
#include <fmt/format.h>

#include <stdexcept>
#include <string>

#include "lf/common/exit_codes.h"

namespace lf {

class Error : public std::runtime_error {
 public:
  Error(const std::string& what, int exit_code) : std::runtime_error(what), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

#define LF_DEFINE_ERROR(Name, code) \
  class Name : public Error {       \
   public:                          \
    explicit Name(const std::string& what) : Error(what, code) {} \
  }

LF_DEFINE_ERROR(ConfigError, kExitConfig);
LF_DEFINE_ERROR(RendezvousError, kExitRendezvous);
LF_DEFINE_ERROR(NetworkError, kExitNetwork);
LF_DEFINE_ERROR(TimeoutError, kExitTimeout);
LF_DEFINE_ERROR(AbortedError, kExitAborted);
LF_DEFINE_ERROR(BackendError, kExitBackend);
// A malformed frame or message: the peer is broken or hostile, never trusted.
LF_DEFINE_ERROR(ProtocolError, kExitNetwork);
#undef LF_DEFINE_ERROR

namespace detail {
[[noreturn]] void throw_with_location(const char* file, int line, const std::string& msg,
                                      void (*thrower)(const std::string&));
template <typename E>
void throw_as(const std::string& msg) { throw E(msg); }
}  // namespace detail

}  // namespace lf

// LF_CHECK(cond, ErrorType, "fmt {}", args...): throws ErrorType("<msg> [file:line]").
#define LF_CHECK(cond, ErrorType, ...)                                                  \
  do {                                                                                  \
    if (!(cond)) [[unlikely]]                                                           \
      ::lf::detail::throw_with_location(__FILE__, __LINE__, ::fmt::format(__VA_ARGS__), \
                                        &::lf::detail::throw_as<ErrorType>);            \
  } while (0)

#define LF_THROW(ErrorType, ...) LF_CHECK(false, ErrorType, __VA_ARGS__)
