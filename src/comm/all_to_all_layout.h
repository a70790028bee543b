#pragma once
// The layout of one all_to_all (communicator.h): the splits checked against the tensors and the
// world, each rank's rows located. Shared by every backend. Internal to lf_comm.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace lf::comm {

struct AllToAllLayout {
  int64_t row_bytes = 0;                  // bytes of one dim-0 row (equal in input and output)
  std::vector<int64_t> send_rows, recv_rows;  // [world]: rows to / from each rank
  std::vector<int64_t> send_first, recv_first;  // [world]: each rank's first row in input / output

  int64_t send_bytes(int r) const { return send_rows[r] * row_bytes; }
  int64_t recv_bytes(int r) const { return recv_rows[r] * row_bytes; }
  int64_t send_offset(int r) const { return send_first[r] * row_bytes; }  // bytes into input
  int64_t recv_offset(int r) const { return recv_first[r] * row_bytes; }  // bytes into output
};

// Empty splits: dim 0 cut in `world` equal parts (it must divide). BackendError naming the
// mismatch (sums vs dim 0, a split count other than the world, row widths or dtypes that differ).
AllToAllLayout all_to_all_layout(const at::Tensor& output, const at::Tensor& input,
                                 const std::vector<int64_t>& output_splits, const std::vector<int64_t>& input_splits,
                                 int world);

}  // namespace lf::comm
