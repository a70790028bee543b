#pragma once
// The FP8 GEMM's output times its scales, in place, for the rowwise GEMMs run without fast accumulation
// (quant::unit_scaled_mm: the tensorwise kernel with unit scales, then y times a's inverse row scales and b's
// column scales): y = T(T(y * row_scale[r]) * col_scale[c]), the roundings of ATen's two in-place multiplies,
// in one pass over y. ATen multiplies a bf16 tensor by a float32 [M, 1] one in its element-at-a-time
// dynamic-casting loop (the FP8 7B LoRA trace on the H100, 2026-12-05: 41 ms of `BinaryFunctor` a step);
// here each thread moves 16 bytes. y [rows, cols] contiguous, cols a multiple of 16 / sizeof(T), y 16-byte
// aligned (fp8_output_scale_op's condition: every FP8 GEMM's dimensions are multiples of 16).
#include "lf/kernels/launch.h"

namespace lf::kernels {

struct Fp8OutputScaleArgs {
  DType dtype = DType::kBFloat16;  // of y
  int64_t rows = 0, cols = 0;
  void* y = nullptr;
  const float* row_scale = nullptr;  // [rows]
  const float* col_scale = nullptr;  // [cols], or null: rows only
};
void fp8_output_scale(const Fp8OutputScaleArgs& a, Stream stream);

}  // namespace lf::kernels
