#include "lf/config/job_plan.h"

namespace lf::config {

int64_t global_batch(const ScheduleSection& s, int64_t world) {
  return s.per_device_train_batch_size * s.gradient_accumulation_steps * world;
}

}  // namespace lf::config
