#include "lf/parallel/make_strategy.h"

#include "lf/comm/communicator.h"
#include "lf/optim/optimizer.h"
#include "lf/parallel/zero_strategy.h"

namespace lf::parallel {

namespace {

// A sharded strategy at world size 1 talks to itself.
comm::Communicator* local_communicator() {
  static const auto local = comm::make_local_communicator();
  return local.get();
}

}  // namespace

std::unique_ptr<ParallelStrategy> make_strategy(const config::ParallelSection& p, StrategySetup setup,
                                                const StrategyContext& context) {
  if (p.zero_stage > 0) {
    if (setup.world == 1) setup.communicator = local_communicator();
    ZeroOptions o;
    o.stage = static_cast<int>(p.zero_stage);
    o.compute_dtype = context.compute_dtype;
    o.offload = p.offload == "params" ? Offload::kParams : p.offload == "optimizer" ? Offload::kOptimizer : Offload::kNone;
    o.host_threads = context.host_threads;
    o.offload_ratio = p.offload_ratio;
    o.comm = {p.prefetch_bucket_mb, p.reduce_bucket_mb, p.allgather_bucket_mb, p.overlap_comm};
    o.host = {p.pin_memory, p.offload_device_norm, p.offload_copy_streams};
    o.optimizer = optim::optimizer_spec(setup.optim.optimizer, setup.optim.loraplus_lr_ratio > 0 &&
                                                                   setup.optim.loraplus_lr_ratio != 1.0);
    return make_zero_strategy(std::move(setup), o);
  }
  if (p.expert_parallel_size > 1) return make_expert_parallel_strategy(p, std::move(setup), context);
  if (setup.world == 1) return make_single_strategy(std::move(setup));
  return make_ddp_strategy(p, std::move(setup), context);
}

}  // namespace lf::parallel
