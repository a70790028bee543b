#pragma once
// Picks and builds the strategy the plan's parallel section asks for (strategy.h): one process,
// data parallel (zero_stage 0 with several ranks), or ZeRO-1/2/3 with or without host offload.
// The section was validated when the plan was built (offload needs stage 2 or 3, ...).
#include <ATen/core/Tensor.h>

#include <memory>

#include "lf/parallel/strategy.h"

namespace lf::parallel {

// What the choice and the strategies' options depend on besides the config.
struct StrategyContext {
  at::ScalarType compute_dtype = at::kFloat;  // the activations' dtype (bf16 under bf16: true)
  int64_t longest_row = 0;                    // the longest padded training row (DDP's embedding rows)
  int host_threads = 1;                       // offload: the host AdamW's threads on this worker
  int64_t micro_batch = 1;                    // examples a rank takes per micro-step
  int64_t accumulation = 1;                   // micro-steps a step
};

std::unique_ptr<ParallelStrategy> make_strategy(const config::ParallelSection& parallel, StrategySetup setup,
                                                const StrategyContext& context);

// The strategies, for tests and for make_strategy.
std::unique_ptr<ParallelStrategy> make_single_strategy(StrategySetup setup);
// Expert parallelism (expert_parallel_strategy.cpp): experts placed per rank, the rest DDP.
std::unique_ptr<ParallelStrategy> make_expert_parallel_strategy(const config::ParallelSection& parallel,
                                                                StrategySetup setup, const StrategyContext& context);
std::unique_ptr<ParallelStrategy> make_ddp_strategy(const config::ParallelSection& parallel, StrategySetup setup,
                                                    const StrategyContext& context);

}  // namespace lf::parallel
