#include "lf/common/disk_space.h"

#include <fmt/format.h>

namespace lf {

uint64_t save_bytes_needed(uint64_t trainable, bool with_optimizer_state) {
  const double per_parameter = with_optimizer_state ? 12.0 : 4.0;
  return static_cast<uint64_t>(per_parameter * static_cast<double>(trainable) * 1.05) + (2u << 20);
}

std::string size_text(double bytes) {
  if (bytes >= double(1ull << 30)) return fmt::format("{:.2f} GiB", bytes / double(1ull << 30));
  if (bytes >= double(1ull << 20)) return fmt::format("{:.2f} MiB", bytes / double(1ull << 20));
  if (bytes >= 1024) return fmt::format("{:.0f} KiB", bytes / 1024);
  return fmt::format("{:.0f} B", bytes);
}

}  // namespace lf
