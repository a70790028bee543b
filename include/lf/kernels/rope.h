#pragma once
// Rotary position embedding on q and k in one launch, Hugging Face's rotate_half convention:
//   y = x * cos + rotate_half(x) * sin,  rotate_half(x) = cat(-x2, x1)
// rounded to T after each product and the sum as the ATen path rounds. `inverse` applies the
// transpose (the gradient): dx = dy * cos + rotate_half^T(dy * sin). In place when in == out.
#include "lf/kernels/launch.h"

namespace lf::kernels {

// One of q / k: rows of `heads * head_dim` elements (row r = b * seq + t), with row strides.
struct RopeOperand {
  const void* in = nullptr;
  void* out = nullptr;  // may equal in
  int64_t heads = 0;
  int64_t in_row_stride = 0, out_row_stride = 0;  // elements
};

struct RopeArgs {
  DType dtype = DType::kBFloat16;  // of q, k and the tables
  int64_t batch = 0, seq = 0, head_dim = 0;  // head_dim even
  RopeOperand q, k;
  const void* cos = nullptr;  // [T, D] or [B, T, D] (contiguous rows of head_dim)
  const void* sin = nullptr;
  int64_t table_batch_stride = 0;  // 0 for [T, D] tables, else elements between batches
  bool inverse = false;
};
void rope(const RopeArgs& a, Stream stream);

}  // namespace lf::kernels
