#pragma once
// bitsandbytes' 8-bit blockwise state quantization as the 8-bit AdamW (src/optim/adamw_8bit.cpp) stores its
// moments, exposed for the tests: the dynamic map (bitsandbytes.functional.create_dynamic_map, sorted, fp32
// [256]; signed for the first moment, unsigned for the second) and quantize_blockwise on the CPU (blocks of
// 256, codes uint8 [n], absmax fp32 [ceil(n / 256)]).
#include <ATen/core/Tensor.h>

#include <utility>

namespace lf::optim {

at::Tensor dynamic_code(bool is_signed);
std::pair<at::Tensor, at::Tensor> quantize_8bit_dynamic(const at::Tensor& x, bool is_signed);

}  // namespace lf::optim
