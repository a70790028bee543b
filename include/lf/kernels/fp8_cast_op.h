#pragma once
// The FP8 cast kernel (fp8_cast.h) as quant::Fp8CastKernel over at::Tensors (fp8_cast_op.cpp, lf_kernels):
// takes bf16 / fp16 / fp32 on the kernels' device, tensorwise or rowwise along the last dimension (the
// forward's x, the input gradient's g); other casts return false and ATen computes them.
#include "lf/quant/fp8.h"

namespace lf::kernels {

quant::Fp8CastKernel fp8_cast_kernel();

}  // namespace lf::kernels
