#include "zero_unit_table.h"

namespace lf::parallel {

void ZeroEvents::log(const char* what, int64_t unit) {
  std::lock_guard lock(mu_);
  events_.push_back({what, unit, std::chrono::steady_clock::now()});
}

void ZeroEvents::clear() {
  std::lock_guard lock(mu_);
  events_.clear();
}

std::vector<ZeroEvent> ZeroEvents::all() const {
  std::lock_guard lock(mu_);
  return events_;
}

}  // namespace lf::parallel
