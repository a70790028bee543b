#pragma once
// SwiGLU's backward fused with the rowwise FP8 casts its two gradients get next (issue 33, FP8 LoRA): dgate and
// dup as swiglu_backward writes them, and, from those bf16 values in the same pass, the casts the input
// gradients of gate_proj and up_proj (FP8-stored rowwise: quant::fp8_stored_grad_input) make of them, each
// column first multiplied by its factor (the weight's inverse row scale): fp8_cast's rowwise cast with col_mul,
// T(dgate * f) rounded, its row amax, scale and e4m3 bytes. gate, up and dout are read once and dgate / dup
// are not read again to be cast. Bit-equal to swiglu_backward then fp8_cast twice
// (tests/kernels/swiglu_fp8_backward_test.cpp). SiLU only (not GeGLU); 2-byte T; a row of up to kFp8RowMaxCols
// in packs of kFp8RowPack; gate / up / dout / dgate / dup 16-byte aligned, the factors 32-byte, fp8 8-byte.
#include "lf/kernels/launch.h"

namespace lf::kernels {

struct SwigluFp8BackwardArgs {
  DType dtype = DType::kBFloat16;  // of gate, up, dout, dgate and dup
  bool e5m2 = false;               // the casts' format, else e4m3fn
  bool pow2 = true;                // scales rounded down to powers of two (the rowwise recipe's)
  int64_t rows = 0, cols = 0;      // every tensor [rows, cols] contiguous
  const void* gate = nullptr;
  const void* up = nullptr;
  const void* dout = nullptr;
  void* dgate = nullptr;
  void* dup = nullptr;
  const float* gate_mul = nullptr;  // [cols]: dgate's column factors (T's values as float), as fp8_cast's col_mul
  const float* up_mul = nullptr;    // [cols]: dup's
  uint8_t* gate_fp8 = nullptr;      // T(dgate * gate_mul)'s FP8 bytes
  uint8_t* up_fp8 = nullptr;
  float* gate_scale = nullptr;      // [rows]: row r of T(dgate * gate_mul) is gate_fp8[r] / gate_scale[r]
  float* up_scale = nullptr;
};
void swiglu_fp8_backward(const SwigluFp8BackwardArgs& a, Stream stream);

}  // namespace lf::kernels
