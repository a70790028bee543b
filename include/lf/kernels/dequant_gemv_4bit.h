#pragma once
// The fused 4-bit GEMM for few rows: y [m, n] = x [m, k] W^T with W [n, k] in bitsandbytes' 4-bit format
// (lf/quant/bnb_4bit.h), dequantized in registers (each weight rounded to x's dtype first, as the
// dequantize-then-GEMM path's buffer holds it) and never written out; fp32 sums, y rounded once. A warp
// per output column, 16 weights a lane per step: reads the half byte a weight once, so it beats
// dequantize + cuBLAS where the GEMM is memory bound (m of a few rows); at training's thousands of rows
// cuBLAS wins (model/bnb4_linear.cpp chooses, LF_QUANT_GEMM). Needs k % 16 == 0 and blocksize % 16 == 0.
#include "lf/kernels/dequant_4bit.h"

namespace lf::kernels {

constexpr int kGemv4MaxRows = 8;

struct Gemv4Args {
  Dequant4Args w;           // the weight: n x k weights (w.n = n * k), w.out unused
  int64_t m = 0, n = 0, k = 0;  // m <= kGemv4MaxRows
  const void* x = nullptr;  // [m, k] contiguous, dtype w.dtype
  void* y = nullptr;        // [m, n] contiguous
};
void dequant_gemv_4bit(const Gemv4Args& a, Stream stream);

}  // namespace lf::kernels
