// The FP8 cast kernel (fp8_cast.h) over at::Tensors: quant::Fp8CastKernel (fp8_cast_op.h).
#include "lf/kernels/fp8_cast_op.h"

#include <ATen/ATen.h>

#include <cstdint>

#include "fused_op_impls.h"
#include "kernel_device.h"
#include "lf/kernels/fp8_cast.h"

namespace lf::kernels {

at::Tensor cast_factors(const at::Tensor& col_mul, at::ScalarType dtype) {
  // The factors' values in x's dtype (ATen's multiply's), passed as float32 (exact from any 16-bit float).
  auto factors = col_mul.reshape({-1}).to(dtype).to(at::kFloat).contiguous();
  // The kernel reads the factors a pack at a time too (8 floats, 32 bytes, at a multiple of 8 columns).
  return reinterpret_cast<uintptr_t>(factors.const_data_ptr()) % 32 != 0 ? factors.clone() : factors;
}

namespace {

// Tensorwise over any shape, rowwise along the last dimension of a row at most kFp8RowMaxCols long, a
// multiple of kFp8RowPack (every FP8 GEMM's dimensions are multiples of 16: the others stay in bf16).
bool takes(const at::Tensor& x, const quant::Fp8Scaling& s) {
  if (!x.defined() || x.dim() < 1 || !on_kernel_device(x) || !is_kernel_dtype(x)) return false;
  if (s.dtype != at::ScalarType::Float8_e4m3fn && s.dtype != at::ScalarType::Float8_e5m2) return false;
  if (!s.rowwise) return true;
  const bool last = s.axis == -1 || s.axis == x.dim() - 1;
  return last && x.size(-1) <= kFp8RowMaxCols && x.size(-1) % kFp8RowPack == 0;
}

// Column factors: rowwise only, one per column of x, on its device.
bool takes_factors(const at::Tensor& x, const at::Tensor& col_mul, const quant::Fp8Scaling& s) {
  return !col_mul.defined() ||
         (s.rowwise && col_mul.numel() == x.size(-1) && col_mul.device() == x.device() && col_mul.is_floating_point());
}

bool fp8_cast_op(const at::Tensor& x, const at::Tensor& col_mul, const quant::Fp8Scaling& s, quant::Fp8Tensor& out) {
  if (!takes(x, s) || !takes_factors(x, col_mul, s)) return false;
  const auto factors = col_mul.defined() ? cast_factors(col_mul, x.scalar_type()) : at::Tensor();
  auto xc = x.contiguous();
  // The rowwise kernel loads a pack (16 bytes of bf16, 32 of float32) at once: a view at another offset is copied.
  if (s.rowwise && reinterpret_cast<uintptr_t>(xc.const_data_ptr()) % 32 != 0) xc = xc.clone();
  Fp8CastArgs a;
  a.dtype = kernel_dtype(xc);
  a.e5m2 = s.dtype == at::ScalarType::Float8_e5m2;
  a.rowwise = s.rowwise;
  a.pow2 = s.pow2;
  a.cols = xc.size(-1);
  a.rows = a.cols == 0 ? 0 : xc.numel() / a.cols;
  out.data = at::empty(xc.sizes(), xc.options().dtype(s.dtype));
  auto scale_shape = xc.sizes().vec();
  scale_shape.back() = 1;  // torchao's amax keeps the reduced dim: [.., 1]
  const auto f32 = xc.options().dtype(at::kFloat);
  out.scale = s.rowwise ? at::empty(scale_shape, f32) : at::empty({}, f32);
  const auto amax = s.rowwise ? at::Tensor() : at::empty({1}, f32);
  a.x = xc.const_data_ptr();
  a.out = static_cast<uint8_t*>(out.data.data_ptr());
  a.scale = out.scale.data_ptr<float>();
  a.amax = amax.defined() ? amax.data_ptr<float>() : nullptr;
  a.col_mul = factors.defined() ? factors.const_data_ptr<float>() : nullptr;
  run_on_device(xc, [&](Stream stream) { fp8_cast(a, stream); });
  return true;
}

}  // namespace

quant::Fp8CastKernel fp8_cast_kernel() { return &fp8_cast_op; }

}  // namespace lf::kernels
