// The FP8 output-scaling kernel (fp8_output_scale.h) over at::Tensors: quant::Fp8ScaleKernel.
#include "lf/kernels/fp8_output_scale_op.h"

#include <ATen/ATen.h>

#include <cstdint>

#include "kernel_device.h"
#include "lf/kernels/fp8_output_scale.h"

namespace lf::kernels {
namespace {

bool takes_scale(const at::Tensor& s, const at::Tensor& y, int64_t n) {
  return s.defined() && s.scalar_type() == at::kFloat && s.numel() == n && s.device() == y.device();
}

bool takes(const at::Tensor& y, const at::Tensor& row_scale, const at::Tensor& col_scale) {
  if (!y.defined() || y.dim() != 2 || !y.is_contiguous() || !on_kernel_device(y) || !is_kernel_dtype(y)) return false;
  const int64_t pack = 16 / static_cast<int64_t>(y.element_size());
  if (y.size(1) % pack != 0 || reinterpret_cast<uintptr_t>(y.const_data_ptr()) % 16 != 0) return false;
  return takes_scale(row_scale, y, y.size(0)) && (!col_scale.defined() || takes_scale(col_scale, y, y.size(1)));
}

bool fp8_output_scale_op(at::Tensor& y, const at::Tensor& row_scale, const at::Tensor& col_scale) {
  if (!takes(y, row_scale, col_scale)) return false;
  const auto rows = row_scale.reshape({-1}).contiguous();
  const auto cols = col_scale.defined() ? col_scale.reshape({-1}).contiguous() : at::Tensor();
  Fp8OutputScaleArgs a;
  a.dtype = kernel_dtype(y);
  a.rows = y.size(0);
  a.cols = y.size(1);
  a.y = y.data_ptr();
  a.row_scale = rows.const_data_ptr<float>();
  a.col_scale = cols.defined() ? cols.const_data_ptr<float>() : nullptr;
  run_on_device(y, [&](Stream stream) { fp8_output_scale(a, stream); });
  return true;
}

}  // namespace

quant::Fp8ScaleKernel fp8_output_scale_kernel() { return &fp8_output_scale_op; }

}  // namespace lf::kernels
