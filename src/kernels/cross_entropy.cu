// Cross-entropy rows with their gradient, in place; see lf/kernels/cross_entropy.h. One block
// a row: pass 1 an online max / sum of exp per thread, combined over the block; pass 2 writes
// exp(x - lse) - [j == y] over the row.
#include <cmath>

#include "kernel_math.cuh"
#include "lf/kernels/cross_entropy.h"

namespace lf::kernels {
namespace {

constexpr int kThreads = 512;

// (m, s): the running max and the sum of exp(x - m) so far.
__device__ __forceinline__ void online_add(float& m, float& s, float x) {
  if (x > m) {
    s = s * expf(m - x) + 1.f;
    m = x;
  } else {
    s += expf(x - m);
  }
}

template <typename T, int kV>
__global__ void __launch_bounds__(kThreads)
    cross_entropy_rows_kernel(T* __restrict__ logits, const int64_t* __restrict__ targets, float* __restrict__ loss,
                              int64_t vocab, int64_t ignore_index, const float* __restrict__ row_scale) {
  T* x = logits + int64_t{blockIdx.x} * vocab;
  const int64_t y = targets[blockIdx.x];
  const bool ignored = y == ignore_index, valid = y >= 0 && y < vocab;
  // Read before any thread overwrites the row; the reductions below synchronise.
  const float picked = valid ? to_float(x[y]) : 0.f;
  const int64_t packs = vocab / kV;
  float m = -INFINITY, s = 0.f;
  for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
    const auto p = load_pack<T, kV>(x + i * kV);
#pragma unroll
    for (int j = 0; j < kV; ++j) online_add(m, s, to_float(p.v[j]));
  }
  const float row_max = block_max(m);
  const float sum = block_sum(m == -INFINITY ? 0.f : s * expf(m - row_max));
  const float lse = row_max + logf(sum);
  const float sc = row_scale ? row_scale[blockIdx.x] : 1.f;  // g * 1.f is g exactly: unscaled rows as before
  if (threadIdx.x == 0) loss[blockIdx.x] = ignored ? 0.f : valid ? lse - picked : NAN;
  for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
    auto p = load_pack<T, kV>(x + i * kV);
#pragma unroll
    for (int j = 0; j < kV; ++j) {
      const float g = expf(to_float(p.v[j]) - lse) - (i * kV + j == y ? 1.f : 0.f);
      p.v[j] = from_float<T>(ignored ? 0.f : g * sc);
    }
    store_pack<T, kV>(x + i * kV, p);
  }
}

}  // namespace

void cross_entropy_rows(const CrossEntropyRowsArgs& a, Stream stream) {
  if (a.rows < 0 || a.vocab <= 0) fail("cross_entropy_rows", "rows < 0 or vocab <= 0");
  if (a.rows > int64_t{0x7fffffff}) fail("cross_entropy_rows", "more than 2^31-1 rows");
  if (a.rows == 0) return;
  if (!a.logits || !a.targets || !a.loss) fail("cross_entropy_rows", "null pointer");
  auto* s = static_cast<cudaStream_t>(stream);
  dispatch_dtype(a.dtype, "cross_entropy_rows", [&]<typename T>() {
    constexpr int kV = 16 / sizeof(T);
    auto* x = static_cast<T*>(a.logits);
    const dim3 grid(static_cast<unsigned>(a.rows)), block(kThreads);
    if (a.vocab % kV == 0 && aligned16(a.logits)) {
      auto* k = &cross_entropy_rows_kernel<T, kV>;
      LF_LAUNCH(k, grid, block, 0, s, x, a.targets, a.loss, a.vocab, a.ignore_index, a.row_scale);
    } else {
      auto* k = &cross_entropy_rows_kernel<T, 1>;
      LF_LAUNCH(k, grid, block, 0, s, x, a.targets, a.loss, a.vocab, a.ignore_index, a.row_scale);
    }
  });
  check_launch("cross_entropy_rows");
}

}  // namespace lf::kernels
