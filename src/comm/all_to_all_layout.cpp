#include "all_to_all_layout.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <numeric>

#include "lf/common/error.h"

namespace lf::comm {
namespace {

// Rows of `t` split `world` ways: the caller's splits, or equal parts.
std::vector<int64_t> rows_of(const at::Tensor& t, const std::vector<int64_t>& splits, int world, const char* which) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  if (splits.empty()) {
    LF_CHECK(rows % world == 0, BackendError,
             "all_to_all: {} has {} rows, not a multiple of the world size {} (pass the splits)", which, rows, world);
    return std::vector<int64_t>(static_cast<size_t>(world), rows / world);
  }
  LF_CHECK(static_cast<int>(splits.size()) == world, BackendError,
           "all_to_all: {} splits has {} entries, expected one per rank ({})", which, splits.size(), world);
  for (const int64_t s : splits)
    LF_CHECK(s >= 0, BackendError, "all_to_all: {} splits [{}] hold a negative count", which, fmt::join(splits, ","));
  const int64_t sum = std::accumulate(splits.begin(), splits.end(), int64_t{0});
  LF_CHECK(sum == rows, BackendError, "all_to_all: {} splits [{}] sum to {}, but the tensor has {} rows", which,
           fmt::join(splits, ","), sum, rows);
  return splits;
}

std::vector<int64_t> firsts(const std::vector<int64_t>& rows) {
  std::vector<int64_t> out(rows.size(), 0);
  std::exclusive_scan(rows.begin(), rows.end(), out.begin(), int64_t{0});
  return out;
}

}  // namespace

AllToAllLayout all_to_all_layout(const at::Tensor& output, const at::Tensor& input,
                                 const std::vector<int64_t>& output_splits, const std::vector<int64_t>& input_splits,
                                 int world) {
  LF_CHECK(input.is_contiguous() && output.is_contiguous(), BackendError, "all_to_all: needs contiguous tensors");
  LF_CHECK(input.scalar_type() == output.scalar_type(), BackendError, "all_to_all: input is {}, output {}",
           c10::toString(input.scalar_type()), c10::toString(output.scalar_type()));
  // A row's width from the trailing dims (a tensor of 0 rows still has them).
  const auto width = [](const at::Tensor& t) {
    int64_t w = 1;
    for (int64_t d = 1; d < t.dim(); ++d) w *= t.size(d);
    return w;
  };
  LF_CHECK(input.dim() == output.dim() && width(input) == width(output), BackendError,
           "all_to_all: input rows of {} elements, output rows of {} (dims {} vs {})", width(input), width(output),
           input.dim(), output.dim());
  AllToAllLayout l;
  l.row_bytes = width(input) * static_cast<int64_t>(input.element_size());
  l.send_rows = rows_of(input, input_splits, world, "input");
  l.recv_rows = rows_of(output, output_splits, world, "output");
  l.send_first = firsts(l.send_rows);
  l.recv_first = firsts(l.recv_rows);
  return l;
}

}  // namespace lf::comm
