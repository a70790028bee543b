#include "lf/common/hash.h"

#include <fmt/format.h>

namespace lf {

std::string hex64(uint64_t v) { return fmt::format("{:016x}", v); }

}  // namespace lf
