#include "lf/plan/zero_bytes.h"

#include <algorithm>

namespace lf::plan {

ZeroStateBytes zero_state_bytes(const std::vector<ZeroUnitCount>& units, const ZeroLayout& z) {
  const double n = static_cast<double>(std::max<int64_t>(z.world, 1)), c = static_cast<double>(z.compute_bytes);
  double t = 0, frozen = 0, on_host = 0;
  ZeroStateBytes m;
  for (const auto& u : units) {
    t += static_cast<double>(u.trainable);
    frozen += static_cast<double>(u.frozen);
    if (u.host) on_host += static_cast<double>(u.trainable);
    // Frozen parameters are gathered with their unit under stage 3 only (resident otherwise).
    m.largest_unit = std::max(m.largest_unit, c * static_cast<double>(u.trainable + (z.stage == 3 ? u.frozen : 0)));
  }
  const double fb = static_cast<double>(z.frozen_bytes);
  m.params = z.stage < 3 ? c * t + fb * frozen : fb * frozen / n;
  m.grads = 4 * t / n + (z.stage == 1 ? 4 * t : 0);
  m.master = 4 * t / n;
  m.moments = 8 * t / n;
  if (z.offload != "none") {
    m.host = 16 * on_host / n;
    if (z.offload != "params") m.params += c * on_host / n;
  }
  return m;
}

std::vector<bool> offload_host_units(const std::vector<int64_t>& trainable_per_unit, double offload_ratio) {
  double total = 0;
  for (const auto n : trainable_per_unit) total += static_cast<double>(n);
  const double budget = offload_ratio * total;
  std::vector<bool> host(trainable_per_unit.size(), false);
  double taken = 0;
  for (size_t i = trainable_per_unit.size(); i-- > 0;) {
    const double numel = static_cast<double>(trainable_per_unit[i]);
    if (numel > 0 && taken + numel <= budget * (1 + 1e-12)) {
      host[i] = true;
      taken += numel;
    }
  }
  return host;
}

}  // namespace lf::plan
