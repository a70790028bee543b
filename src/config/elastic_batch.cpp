#include "lf/config/elastic_batch.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "lf/common/error.h"

namespace lf::config {

std::string keep_elastic_global_batch(JobPlan& plan, int64_t base_world, int64_t world) {
  ScheduleSection& c = plan.schedule;
  if (base_world <= 0 || world == base_world) return "";
  LF_CHECK(world > 0, ConfigError, "elastic job: world size {} (WORLD_SIZE) must be positive", world);
  const int64_t micro = c.per_device_train_batch_size, accum = c.gradient_accumulation_steps;
  // Micro-batches of one step over the whole job: what the ranks of any round share out.
  const int64_t slots = accum * base_world;
  if (slots % world != 0) {
    std::vector<int64_t> fits;
    for (int64_t w = 1; w <= slots; ++w)
      if (slots % w == 0) fits.push_back(w);
    LF_THROW(ConfigError,
             "elastic restart on world size {}: the job's global batch is {} examples a step "
             "(per_device_train_batch_size {} x gradient_accumulation_steps {} x world size {} of its first round), "
             "and its {} x {} = {} micro-batches a step do not divide over {} ranks, so no gradient_accumulation_steps "
             "keeps it. lf-worker stops rather than train on another global batch: run on a world size that divides "
             "{} ({}), or start the job with a gradient_accumulation_steps that every world size you expect divides "
             "into (the checkpoints resume with it)",
             world, micro * slots, micro, accum, base_world, accum, base_world, slots, world, slots,
             fmt::join(fits, ", "));
  }
  c.gradient_accumulation_steps = slots / world;
  return fmt::format("elastic: world size {} (the job's first round had {}): gradient_accumulation_steps {} -> {}, so "
                     "the global batch stays {} examples a step (per_device_train_batch_size {} x {} x {})",
                     world, base_world, accum, c.gradient_accumulation_steps, micro * slots, micro,
                     c.gradient_accumulation_steps, world);
}

}  // namespace lf::config
