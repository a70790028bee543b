#pragma once
// A 2-D tensor's transposed copy: out [cols, rows] = x [rows, cols]^T, both row-major. FP8 GEMMs on Hopper read
// both operands along the reduction dimension, so the input gradient of an FP8-stored weight and the columnwise
// casts of dW need transposed copies each step (quant/fp8.cpp's cuBLASLt layouts). ATen copies a transposed
// view element by element in its strided loop (`gpu_kernel_impl_nocast`: ~49 ms of the FP8 7B LoRA step's
// trace on the H100, 2026-12-05); here a block moves a 64 x 64 tile through shared memory, 16 bytes a load
// and a store. Any 1-, 2- or 4-byte element (it moves bits); rows and cols multiples of 16 bytes' worth of
// elements, both pointers 16-byte aligned (transpose_op's conditions).
#include "lf/kernels/launch.h"

namespace lf::kernels {

struct TransposeArgs {
  int element_bytes = 1;  // 1, 2 or 4
  int64_t rows = 0, cols = 0;
  const void* x = nullptr;  // [rows, cols]
  void* out = nullptr;      // [cols, rows]
};
void transpose(const TransposeArgs& a, Stream stream);

}  // namespace lf::kernels
