#pragma once
// bitsandbytes' 4-bit weights (lf/quant/bnb_4bit.h) dequantized on the GPU, bit-equal to
// quant::dequantize_4bit (bitsandbytes' CPU arithmetic): each weight = code[its 4 bits] x its block's
// scale, one fp32 product rounded to the output dtype (RNE); a nested scale = dynamic_map[code] x
// nested_absmax[block / 256], then + offset, two fp32 roundings (no FMA). Elementwise over the
// packed bytes: a thread per byte, two weights, the first in the high nibble. Memory bound.
#include "lf/kernels/launch.h"

namespace lf::kernels {

struct Dequant4Args {
  DType dtype = DType::kBFloat16;  // of out
  int64_t n = 0;                   // weights
  int64_t blocksize = 64;
  const uint8_t* data = nullptr;          // [ceil(n / 2)]
  const float* code = nullptr;            // [16] the code values (nf4 / fp4)
  const float* absmax = nullptr;          // [blocks] fp32; null when nested
  const uint8_t* absmax_codes = nullptr;  // nested: [blocks] codes of dynamic_map
  const float* dynamic_map = nullptr;     // nested: [256]
  const float* nested_absmax = nullptr;   // nested: [ceil(blocks / 256)]
  const float* offset = nullptr;          // nested: [1], on the device
  void* out = nullptr;                    // [n]
};
void dequant_4bit(const Dequant4Args& a, Stream stream);

}  // namespace lf::kernels
