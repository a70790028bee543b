#pragma once
// The transpose kernel (transpose.h) as quant::TransposeKernel over at::Tensors (transpose_op.cpp, lf_kernels):
// a contiguous 2-D tensor of 1-, 2- or 4-byte elements on the kernels' device whose rows and columns fill 16-byte
// packs; anything else returns false and ATen copies.
#include "lf/quant/fp8.h"

namespace lf::kernels {

quant::TransposeKernel transpose_kernel();

}  // namespace lf::kernels
