#include "lf/plan/zero_comm.h"

#include <algorithm>
#include <cmath>

namespace lf::plan {

namespace {

// How many units of `unit` fit in `bucket` (the same measure), clamped to [at_least, at_most].
int64_t units_in(double bucket, int64_t unit, int64_t at_least, int64_t at_most) {
  const double fit = unit > 0 ? std::floor(bucket / static_cast<double>(unit)) : static_cast<double>(at_most);
  return std::clamp(static_cast<int64_t>(std::min(fit, 1e12)), at_least, std::max(at_least, at_most));
}

}  // namespace

ZeroCommDepths zero_comm_depths(const ZeroCommInputs& in) {
  constexpr double kMiB = 1024.0 * 1024.0;
  const double element = static_cast<double>(std::max<int64_t>(in.compute_bytes, 1));
  ZeroCommDepths d;
  d.prefetch_units = in.stage != 3 || in.prefetch_bucket_mb <= 0
                         ? 0
                         : units_in(in.prefetch_bucket_mb * kMiB, in.largest_gathered_bytes, 1, in.units - 1);
  d.reductions_in_flight =
      in.overlap_comm ? units_in(in.reduce_bucket_mb * kMiB / element, in.largest_trainable, 2, in.units) : 0;
  d.update_gathers_in_flight =
      in.stage == 3 ? 0 : units_in(in.allgather_bucket_mb * kMiB / element, in.largest_trainable, 1, in.units);
  return d;
}

}  // namespace lf::plan
