#pragma once
// Learning-rate schedules with transformers' exact formulas (get_scheduler):
// the multiplier of the base lr at optimizer step `step` (0-based: the lr the
// step-th update uses). Torch-free.
#include <cstdint>
#include <string>

namespace lf::optim {

enum class LrScheduleKind { kLinear, kCosine, kConstant, kConstantWithWarmup };

// "linear" | "cosine" | "constant" | "constant_with_warmup"; ConfigError otherwise.
LrScheduleKind parse_lr_schedule(const std::string& name);

struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::kLinear;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;
  double num_cycles = 0.5;  // cosine

  double factor(int64_t step) const;
};

// HF TrainingArguments.get_warmup_steps: warmup_steps >= 1 wins; a value in (0, 1)
// or warmup_ratio is a fraction, ceil(fraction x total).
int64_t hf_warmup_steps(double warmup_steps, double warmup_ratio, int64_t total_steps);

}  // namespace lf::optim
