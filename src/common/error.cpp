#include "lf/common/error.h"

namespace lf::detail {

[[noreturn]] void throw_with_location(const char* file, int line, const std::string& msg,
                                      void (*thrower)(const std::string&)) {
  std::string_view path(file);
  if (auto pos = path.find("src/"); pos != std::string_view::npos) path = path.substr(pos);
  thrower(fmt::format("{} [{}:{}]", msg, path, line));
  __builtin_unreachable();
}

}  // namespace lf::detail
