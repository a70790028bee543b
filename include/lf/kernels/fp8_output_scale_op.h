#pragma once
// The FP8 output-scaling kernel (fp8_output_scale.h) as quant::Fp8ScaleKernel over at::Tensors
// (fp8_output_scale_op.cpp, lf_kernels): a contiguous 2-D bf16 / fp16 / fp32 y on the kernels' device whose
// rows fill 16-byte packs, float32 scales of its rows (and columns); anything else returns false and ATen
// multiplies.
#include "lf/quant/fp8.h"

namespace lf::kernels {

quant::Fp8ScaleKernel fp8_output_scale_kernel();

}  // namespace lf::kernels
