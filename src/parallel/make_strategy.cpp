#include "lf/parallel/make_strategy.h"

#include "lf/comm/communicator.h"
#include "lf/common/error.h"
#include "lf/config/train_config.h"
#include "lf/parallel/zero_strategy.h"

namespace lf::parallel {

namespace {

// A sharded strategy at world size 1 talks to itself.
comm::Communicator* local_communicator() {
  static const auto local = comm::make_local_communicator();
  return local.get();
}

}  // namespace

std::unique_ptr<ParallelStrategy> make_strategy(const config::TrainConfig& config, StrategySetup setup,
                                                const StrategyContext& context) {
  LF_CHECK(config.offload == "none" || config.zero_stage >= 2, ConfigError,
           "offload: {} needs zero_stage 2 or 3 (or a DeepSpeed ZeRO-2/3 offload config); zero_stage is {}",
           config.offload, config.zero_stage);
  if (config.zero_stage > 0) {
    LF_CHECK(config.zero_stage <= 3, ConfigError, "zero_stage {}: expected 0 (data parallel), 1, 2 or 3",
             config.zero_stage);
    if (setup.world == 1) setup.communicator = local_communicator();
    ZeroOptions o;
    o.stage = static_cast<int>(config.zero_stage);
    o.compute_dtype = context.compute_dtype;
    o.offload = config.offload == "params" ? Offload::kParams
                : config.offload == "optimizer" ? Offload::kOptimizer
                                                : Offload::kNone;
    o.host_threads = context.host_threads;
    o.offload_ratio = config.offload_ratio;
    return make_zero_strategy(std::move(setup), o);
  }
  if (setup.world == 1) return make_single_strategy(std::move(setup));
  return make_ddp_strategy(config, std::move(setup), context);
}

}  // namespace lf::parallel
