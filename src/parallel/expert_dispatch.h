#pragma once
// Expert parallelism's token dispatch (model/expert_dispatch.h) over a Communicator's all_to_all.
// Internal to lf_parallel; the strategy is expert_parallel_strategy.cpp.
#include <memory>

#include "lf/model/expert_dispatch.h"

namespace lf::comm {
class Communicator;
}

namespace lf::parallel {

// Experts placed per rank: rank r of an EP group of `comm.world_size()` ranks holds experts
// [r · E/ep, (r + 1) · E/ep) of every sparse layer (contiguous blocks, so a layer's sorted choices
// go to the ranks in rank order).
std::unique_ptr<model::ExpertDispatch> make_all_to_all_dispatch(comm::Communicator& comm);

}  // namespace lf::parallel
