#include "host_sums.h"

#include <ATen/ATen.h>

#include "lf/comm/communicator.h"

namespace lf::parallel {

std::vector<double> sum_over_ranks(comm::Communicator& comm, std::vector<double> values, c10::Device device) {
  if (values.empty()) return values;
  const auto n = static_cast<int64_t>(values.size());
  auto t = at::from_blob(values.data(), {n}, at::TensorOptions(at::kDouble)).to(device, /*non_blocking=*/false,
                                                                               /*copy=*/true);
  comm.all_reduce(t, comm::ReduceOp::kSum)->wait();
  const auto host = t.cpu();
  const double* p = host.data_ptr<double>();
  return {p, p + n};
}

}  // namespace lf::parallel
