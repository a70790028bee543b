#pragma once
// The strategies' all_reduce_sums (strategy.h): a few host doubles summed over ranks in one
// all-reduce of a [n] double tensor on the strategy's device. Internal to lf_parallel.
#include <c10/core/Device.h>

#include <vector>

namespace lf::comm {
class Communicator;
}

namespace lf::parallel {

// Blocks until the sums are back on the host. Element 0 is summed in the same order whatever n
// (the ring's first chunk always starts with it), so a loss reduced beside counters is the loss
// reduced alone, to the bit.
std::vector<double> sum_over_ranks(comm::Communicator& comm, std::vector<double> values, c10::Device device);

}  // namespace lf::parallel
