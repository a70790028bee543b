#include "lf/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "lf/common/error.h"

namespace lf::optim {

LrScheduleKind parse_lr_schedule(const std::string& name) {
  if (name == "linear") return LrScheduleKind::kLinear;
  if (name == "cosine") return LrScheduleKind::kCosine;
  if (name == "constant") return LrScheduleKind::kConstant;
  if (name == "constant_with_warmup") return LrScheduleKind::kConstantWithWarmup;
  LF_THROW(ConfigError, "lr_scheduler_type: '{}' is not supported (linear, cosine, constant, constant_with_warmup)",
           name);
}

double LrSchedule::factor(int64_t step) const {
  const auto s = static_cast<double>(step);
  const auto w = static_cast<double>(warmup_steps);
  const auto n = static_cast<double>(total_steps);
  switch (kind) {
    case LrScheduleKind::kConstant:
      return 1.0;
    case LrScheduleKind::kConstantWithWarmup:
      return step < warmup_steps ? s / std::max(1.0, w) : 1.0;
    case LrScheduleKind::kLinear:
      if (step < warmup_steps) return s / std::max(1.0, w);
      return std::max(0.0, (n - s) / std::max(1.0, n - w));
    case LrScheduleKind::kCosine: {
      if (step < warmup_steps) return s / std::max(1.0, w);
      const double progress = (s - w) / std::max(1.0, n - w);
      return std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * num_cycles * 2.0 * progress)));
    }
  }
  return 1.0;
}

int64_t hf_warmup_steps(double warmup_steps, double warmup_ratio, int64_t total_steps) {
  if (warmup_steps >= 1) return static_cast<int64_t>(warmup_steps);
  const double ratio = warmup_steps > 0 ? warmup_steps : warmup_ratio;
  return static_cast<int64_t>(std::ceil(static_cast<double>(total_steps) * ratio));
}

}  // namespace lf::optim
