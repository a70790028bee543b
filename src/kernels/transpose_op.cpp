// The transpose kernel (transpose.h) over at::Tensors: quant::TransposeKernel.
#include "lf/kernels/transpose_op.h"

#include <ATen/ATen.h>

#include <cstdint>

#include "kernel_device.h"
#include "lf/kernels/transpose.h"

namespace lf::kernels {
namespace {

bool takes(const at::Tensor& x) {
  if (!x.defined() || x.dim() != 2 || !x.is_contiguous() || !on_kernel_device(x)) return false;
  const auto bytes = static_cast<int64_t>(x.element_size());
  if (bytes != 1 && bytes != 2 && bytes != 4) return false;
  const int64_t pack = 16 / bytes;
  return x.size(0) % pack == 0 && x.size(1) % pack == 0 && (x.size(0) + 63) / 64 <= 65535 &&
         reinterpret_cast<uintptr_t>(x.const_data_ptr()) % 16 == 0;
}

bool transpose_op(const at::Tensor& x, at::Tensor& out) {
  if (!takes(x)) return false;
  out = at::empty({x.size(1), x.size(0)}, x.options());  // the caching allocator's blocks are 512-byte aligned
  TransposeArgs a;
  a.element_bytes = static_cast<int>(x.element_size());
  a.rows = x.size(0);
  a.cols = x.size(1);
  a.x = x.const_data_ptr();
  a.out = out.data_ptr();
  run_on_device(x, [&](Stream stream) { transpose(a, stream); });
  return true;
}

}  // namespace

quant::TransposeKernel transpose_kernel() { return &transpose_op; }

}  // namespace lf::kernels
