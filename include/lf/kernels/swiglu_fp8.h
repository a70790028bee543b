#pragma once
// SwiGLU's forward fused with the rowwise FP8 cast of its output (issue 33): act = T(silu(gate)) * up, as
// swiglu_forward writes it, and act's FP8 cast along each row, as fp8_cast (rowwise) writes it from that act,
// in one pass over gate and up: the next layer's FP8 forward (down_proj) reads the cast instead of reading act
// again to cast it. Bit-equal to the two kernels in sequence (tests/kernels/swiglu_fp8_test.cpp).
// 2-byte T only (bf16, fp16): a row of up to kFp8RowMaxCols held in registers, cols a multiple of kFp8RowPack,
// gate / up / out 16-byte aligned, fp8 8-byte aligned.
#include "lf/kernels/launch.h"

namespace lf::kernels {

struct SwigluFp8Args {
  DType dtype = DType::kBFloat16;  // of gate, up and out
  bool e5m2 = false;               // else e4m3fn
  bool pow2 = true;                // scales rounded down to powers of two (the rowwise recipe's)
  int64_t rows = 0, cols = 0;      // every tensor [rows, cols] contiguous
  const void* gate = nullptr;
  const void* up = nullptr;
  void* out = nullptr;             // act in dtype
  uint8_t* fp8 = nullptr;          // act's FP8 bytes
  float* scale = nullptr;          // [rows]: act's row r is fp8[r] / scale[r]
};
void swiglu_fp8_forward(const SwigluFp8Args& a, Stream stream);

}  // namespace lf::kernels
