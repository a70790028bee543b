// A 2-D tensor's transposed copy; see lf/kernels/transpose.h. Bit-equal to ATen's `x.t().contiguous()`
// (it moves bits): transpose_test.cpp on the GPU (kernels_test) and in the CPU emulation (kernels_emu_test).
#include <algorithm>
#include <cstdint>

#include "kernel_math.cuh"
#include "lf/kernels/transpose.h"

namespace lf::kernels {
namespace {

constexpr int kTile = 64;      // a tile is kTile x kTile elements
constexpr int kThreads = 256;

// Block (bx, by) moves x's tile at rows by*kTile.., cols bx*kTile.. to out's tile at rows bx*kTile..,
// cols by*kTile... A pack is kV elements (16 bytes); rows and cols are multiples of kV, so a pack is either
// wholly inside the matrix or wholly outside it. The tile's rows are one element longer so that the
// column reads of the second phase (one element from each of kV rows) fall in different banks.
template <typename T>
__global__ void __launch_bounds__(kThreads) transpose_kernel(const TransposeArgs a) {
  constexpr int kV = 16 / sizeof(T), kPacks = kTile / kV;  // packs a tile row
  __shared__ T tile[kTile][kTile + 1];
  const T* x = static_cast<const T*>(a.x);
  T* out = static_cast<T*>(a.out);
  const int64_t row0 = int64_t{blockIdx.y} * kTile, col0 = int64_t{blockIdx.x} * kTile;
  for (int i = threadIdx.x; i < kTile * kPacks; i += kThreads) {
    const int r = i / kPacks, c = (i % kPacks) * kV;
    if (row0 + r < a.rows && col0 + c < a.cols) {
      const auto v = load_pack<T, kV>(x + (row0 + r) * a.cols + col0 + c);
#pragma unroll
      for (int j = 0; j < kV; ++j) tile[r][c + j] = v.v[j];
    }
  }
  __syncthreads();
  // out row col0 + r holds x's column col0 + r; its pack at out column row0 + c gathers x's rows row0 + c...
  for (int i = threadIdx.x; i < kTile * kPacks; i += kThreads) {
    const int r = i / kPacks, c = (i % kPacks) * kV;
    if (col0 + r < a.cols && row0 + c < a.rows) {
      Pack<T, kV> v;
#pragma unroll
      for (int j = 0; j < kV; ++j) v.v[j] = tile[c + j][r];
      store_pack<T, kV>(out + (col0 + r) * a.rows + row0 + c, v);
    }
  }
}

template <typename T>
void launch_transpose(const TransposeArgs& a, cudaStream_t s) {
  constexpr int kV = 16 / sizeof(T);
  if (a.rows % kV != 0 || a.cols % kV != 0 || reinterpret_cast<uintptr_t>(a.x) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(a.out) % 16 != 0)
    fail("transpose", "rows or cols not a multiple of a 16-byte pack, or a pointer not 16-byte aligned");
  const int64_t by = (a.rows + kTile - 1) / kTile, bx = (a.cols + kTile - 1) / kTile;
  if (by > 65535) fail("transpose", "more than 65535 x 64 rows");
  auto* k = &transpose_kernel<T>;
  LF_LAUNCH(k, dim3(static_cast<unsigned>(bx), static_cast<unsigned>(by)), dim3(kThreads), 0, s, a);
}

}  // namespace

void transpose(const TransposeArgs& a, Stream stream) {
  if (a.rows < 0 || a.cols < 0) fail("transpose", "negative size");
  if (a.rows == 0 || a.cols == 0) return;
  if (!a.x || !a.out) fail("transpose", "null pointer");
  auto* s = static_cast<cudaStream_t>(stream);
  switch (a.element_bytes) {
    case 1: launch_transpose<uint8_t>(a, s); break;
    case 2: launch_transpose<uint16_t>(a, s); break;
    case 4: launch_transpose<uint32_t>(a, s); break;
    default: fail("transpose", "element size not 1, 2 or 4 bytes");
  }
  check_launch("transpose");
}

}  // namespace lf::kernels
