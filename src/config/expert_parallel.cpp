#include "lf/config/expert_parallel.h"

#include "lf/common/error.h"

namespace lf::config {

void check_expert_parallel(const JobPlan& plan, int64_t world, int64_t experts) {
  const ParallelSection& p = plan.parallel;
  const int64_t ep = p.expert_parallel_size;
  LF_CHECK(ep >= 1, ConfigError, "expert_model_parallel_size must be >= 1, got {}", ep);
  if (ep == 1) return;
  LF_CHECK(experts > 0, ConfigError,
           "expert_model_parallel_size {}: {} is a dense model (no experts to place over ranks); remove the key",
           ep, plan.model.model_name_or_path);
  LF_CHECK(p.zero_stage == 0, ConfigError,
           "expert_model_parallel_size {} with zero_stage {} (from {}): expert parallelism under ZeRO is not "
           "implemented (the experts are not in ZeRO's units, and ZeRO would shard each rank's experts again); use "
           "zero_stage 0 (the non-expert parameters then train data-parallel) or drop the key",
           ep, p.zero_stage, p.sharding_source.empty() ? "zero_stage" : p.sharding_source);
  LF_CHECK(!plan.adapter.freeze(), ConfigError,
           "expert_model_parallel_size {} with finetuning_type freeze is not implemented (a frozen expert would be "
           "saved from this rank's slice, not gathered); use finetuning_type full or lora, or drop the key",
           ep);
  LF_CHECK(world % ep == 0, ConfigError,
           "expert_model_parallel_size {} does not divide the world size {}: use a divisor of it", ep, world);
  LF_CHECK(ep == world, ConfigError,
           "expert_model_parallel_size {} on {} ranks: lf-train places the experts over the whole world (the expert "
           "data-parallel groups of a size below the world are not built yet); set it to {} or 1",
           ep, world, world);
  LF_CHECK(experts % ep == 0, ConfigError,
           "expert_model_parallel_size {}: the model's {} experts a layer do not split evenly over {} ranks; use a "
           "divisor of {}",
           ep, experts, ep, experts);
}

}  // namespace lf::config
