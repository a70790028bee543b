#pragma once
// FP8 training's cast on the GPU (lf/quant/fp8.h, torchao's hp_tensor_to_float8_dynamic), bit-equal to
// quant::fp8_cast: amax over the row (rowwise) or the tensor (tensorwise), scale = float32(fmax *
// (1 / max(double(amax), 1e-12))) (rowwise: its power of two below, the exponent bits), each element
// float32(x) * scale saturated to +-fmax and rounded to nearest even. Amax and scale stay on the device:
// no host sync.
// - rowwise: the row read once into registers (cols <= kFp8RowMaxCols, in packs of kFp8RowPack), its amax
//   reduced, then scaled and written as FP8 with the row's scale: a warp a row for 2-byte rows of up to
//   4,096 (8 rows a block, shuffles), else a block a row;
// - tensorwise: a grid-stride amax (atomicMax on the float's bits: non-negative floats order as their
//   bits) into `amax` (zeroed by the launcher on the stream), then the cast, which reads the amax, computes
//   the scale in every block and writes it once. x is read twice: the scale needs the whole tensor first.
#include "lf/kernels/launch.h"

namespace lf::kernels {

inline constexpr int64_t kFp8RowMaxCols = 24 * 1024;
inline constexpr int64_t kFp8RowPack = 8;  // rowwise: cols a multiple of it, x 32-byte aligned

struct Fp8CastArgs {
  DType dtype = DType::kBFloat16;  // of x
  bool e5m2 = false;               // else e4m3fn
  bool rowwise = false;
  bool pow2 = false;
  int64_t rows = 0, cols = 0;      // x [rows, cols] contiguous (tensorwise: any rows x cols = numel)
  const void* x = nullptr;
  uint8_t* out = nullptr;          // [rows, cols] FP8 bytes
  float* scale = nullptr;          // [rows] rowwise, [1] tensorwise
  float* amax = nullptr;           // tensorwise: [1] scratch
  // rowwise: [cols] factors each column is multiplied by first, the product rounded to x's dtype (ATen's
  // x.mul(col_mul) in x's dtype: quant::fp8_cast_scaled_columns); null for a plain cast.
  const float* col_mul = nullptr;
};
void fp8_cast(const Fp8CastArgs& a, Stream stream);

}  // namespace lf::kernels
