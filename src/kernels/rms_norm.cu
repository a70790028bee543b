// RMSNorm (+ the residual add before it) forward and backward; see lf/kernels/rms_norm.h.
// Forward: one block per row, two passes over the row (the second re-reads what this thread
// just read or wrote, from L1/L2); rows of at most 32 packs: several rows a block (the narrow
// kernels). Backward: a grid of a few blocks per multiprocessor strides
// over the rows; each thread owns the same columns in every row, so its share of dweight sums
// in shared memory without atomics, and each block writes one fp32 row of partial sums that a
// second kernel adds up in a fixed order (deterministic).
#include <algorithm>

#include "kernel_math.cuh"
#include "lf/kernels/rms_norm.h"

namespace lf::kernels {
namespace {

constexpr int kMaxThreads = 256;
constexpr int kBackwardBlocksPerSm = 8;
constexpr int kSumRows = 8;  // column_sum_kernel's block is 32 x kSumRows

int threads_for(int64_t packs) {
  return static_cast<int>(std::clamp<int64_t>((packs + 31) / 32 * 32, 32, kMaxThreads));
}

int64_t backward_blocks(int64_t rows) {
  return std::max<int64_t>(1, std::min<int64_t>(rows, int64_t{multiprocessor_count()} * kBackwardBlocksPerSm));
}

// The weight's factor for each element of pack p: T(w) (y = w * T(n)), or Gemma's 1 + w with w float32
// (kOne: y = T(n * (1 + w)), rounded once). The variants differ only in these three places below.
template <typename T, int kV, bool kOne>
__device__ __forceinline__ Pack<float, kV> factor_pack(const void* w, int64_t p) {
  Pack<float, kV> f;
  if constexpr (kOne) {
    const float* wf = static_cast<const float*>(w) + p * kV;
#pragma unroll
    for (int i = 0; i < kV; ++i) f.v[i] = 1.f + wf[i];
  } else {
    const auto ww = load_pack<T, kV>(static_cast<const T*>(w) + p * kV);
#pragma unroll
    for (int i = 0; i < kV; ++i) f.v[i] = to_float(ww.v[i]);
  }
  return f;
}

// y from the input element a, rstd r and the factor f: ATen's roundings of either norm.
template <typename T, bool kOne>
__device__ __forceinline__ T norm_out(float a, float r, float f) {
  if constexpr (kOne) return from_float<T>((a * r) * f);
  else return from_float<T>(f * round_to<T>(a * r));
}

// The gradient reaching n (dy times the factor; T-rounded as the ATen path's bf16 product, or not:
// Gemma's fp32), and one row's term of dweight.
template <typename T, bool kOne>
__device__ __forceinline__ float dn_of(float g, float f) {
  if constexpr (kOne) return g * f;
  else return round_to<T>(g * f);
}
template <typename T, bool kOne>
__device__ __forceinline__ float dw_term(float g, float n) {
  if constexpr (kOne) return g * n;
  else return round_to<T>(g * round_to<T>(n));
}

template <typename T, int kV, bool kAdd, bool kOne>
__global__ void __launch_bounds__(kMaxThreads)
    rms_norm_forward_kernel(const T* __restrict__ x, const T* __restrict__ delta, const void* __restrict__ w, T* h,
                            T* __restrict__ y, float* __restrict__ rstd, int64_t cols, float eps) {
  const int64_t row = blockIdx.x;
  const int64_t packs = cols / kV;
  const T* xr = x + row * cols;
  T* hr = kAdd ? h + row * cols : nullptr;
  float ss = 0.f;
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
    auto a = load_pack<T, kV>(xr + p * kV);
    if constexpr (kAdd) {
      const auto d = load_pack<T, kV>(delta + row * cols + p * kV);
#pragma unroll
      for (int i = 0; i < kV; ++i) a.v[i] = from_float<T>(to_float(a.v[i]) + to_float(d.v[i]));
      store_pack<T, kV>(hr + p * kV, a);
    }
#pragma unroll
    for (int i = 0; i < kV; ++i) {
      const float f = to_float(a.v[i]);
      ss += f * f;
    }
  }
  ss = block_sum(ss);
  const float r = rsqrtf(ss / static_cast<float>(cols) + eps);
  if (threadIdx.x == 0) rstd[row] = r;
  const T* src = kAdd ? hr : xr;
  T* yr = y + row * cols;
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
    const auto a = load_pack<T, kV>(src + p * kV);
    const auto f = factor_pack<T, kV, kOne>(w, p);
    Pack<T, kV> o;
#pragma unroll
    for (int i = 0; i < kV; ++i) o.v[i] = norm_out<T, kOne>(to_float(a.v[i]), r, f.v[i]);
    store_pack<T, kV>(yr + p * kV, o);
  }
}

// One pack of dx from dy (g), h (a), the weight (ww), the residual's gradient (e, when kDh), the row's rstd
// and mean(dn * n) (dot): the block and the narrow-row backward kernels share it (the same roundings).
template <typename T, int kV, bool kDh, bool kOne>
__device__ __forceinline__ Pack<T, kV> dx_pack(const Pack<T, kV>& g, const Pack<T, kV>& a, const Pack<float, kV>& f,
                                               const Pack<T, kV>& e, float r, float dot) {
  Pack<T, kV> o;
#pragma unroll
  for (int i = 0; i < kV; ++i) {
    const float n = to_float(a.v[i]) * r;
    const float dn = dn_of<T, kOne>(to_float(g.v[i]), f.v[i]);
    float v = r * (dn - n * dot);
    if constexpr (kDh) v = round_to<T>(v) + to_float(e.v[i]);
    o.v[i] = from_float<T>(v);
  }
  return o;
}

// dy -> dx (and this block's dweight partial row). With n = h * rstd and dn = T(dy * w) (the
// ATen path's rounding), dh = rstd * (dn - n * mean(dn * n)); dx = T(T(dh) + dh_residual).
template <typename T, int kV, bool kDw, bool kDh, bool kOne>
__global__ void __launch_bounds__(kMaxThreads)
    rms_norm_backward_kernel(const T* __restrict__ dy, const T* __restrict__ h, const void* __restrict__ w,
                             const float* __restrict__ rstd, const T* __restrict__ dres, T* __restrict__ dx,
                             float* __restrict__ dw_partial, int64_t rows, int64_t cols) {
  LF_DYNAMIC_SHARED(float, acc);  // [cols] when kDw; thread-owned columns
  const int64_t packs = cols / kV;
  if constexpr (kDw) {
    for (int64_t p = threadIdx.x; p < packs; p += blockDim.x)
#pragma unroll
      for (int i = 0; i < kV; ++i) acc[p * kV + i] = 0.f;
  }
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float r = rstd[row];
    const int64_t base = row * cols;
    float dot = 0.f;
    for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
      const auto g = load_pack<T, kV>(dy + base + p * kV);
      const auto a = load_pack<T, kV>(h + base + p * kV);
      const auto f = factor_pack<T, kV, kOne>(w, p);
#pragma unroll
      for (int i = 0; i < kV; ++i) {
        const float n = to_float(a.v[i]) * r;
        const float gy = to_float(g.v[i]);
        dot += dn_of<T, kOne>(gy, f.v[i]) * n;
        if constexpr (kDw) acc[p * kV + i] += dw_term<T, kOne>(gy, n);
      }
    }
    dot = block_sum(dot) / static_cast<float>(cols);
    for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
      const auto g = load_pack<T, kV>(dy + base + p * kV);
      const auto a = load_pack<T, kV>(h + base + p * kV);
      const auto f = factor_pack<T, kV, kOne>(w, p);
      Pack<T, kV> e;
      if constexpr (kDh) e = load_pack<T, kV>(dres + base + p * kV);
      store_pack<T, kV>(dx + base + p * kV, dx_pack<T, kV, kDh, kOne>(g, a, f, e, r, dot));
    }
  }
  if constexpr (kDw) {
    for (int64_t p = threadIdx.x; p < packs; p += blockDim.x)
#pragma unroll
      for (int i = 0; i < kV; ++i) dw_partial[blockIdx.x * cols + p * kV + i] = acc[p * kV + i];
  }
}

// Rows of at most 32 packs (Qwen3's q/k norms: 128 bf16 = 16 packs). A block a row gave them
// 32-thread blocks with half the lanes idle; here a group of `lanes` threads (the packs rounded
// up to a power of two) takes a row, kNarrowThreads / lanes rows a block, each thread one pack in
// registers. group_sum adds in block_sum's butterfly order over a one-warp block (the lanes that
// block had beyond the group added zeros), so y, rstd and dx equal the block kernels' bit for bit.
constexpr int kNarrowThreads = 256;

__device__ __forceinline__ float group_sum(float v, int lanes) {
  for (int m = lanes / 2; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

template <typename T, int kV, bool kAdd, bool kOne>
__global__ void __launch_bounds__(kNarrowThreads)
    rms_norm_forward_rows_kernel(const T* __restrict__ x, const T* __restrict__ delta, const void* __restrict__ w, T* h,
                                 T* __restrict__ y, float* __restrict__ rstd, int64_t rows, int64_t cols, int lanes,
                                 float eps) {
  const int64_t row = int64_t{blockIdx.x} * (kNarrowThreads / lanes) + threadIdx.x / lanes;
  const int64_t p = threadIdx.x % lanes;
  const bool mine = row < rows && p < cols / kV;  // every thread still joins the shuffles
  Pack<T, kV> a{};
  float ss = 0.f;
  if (mine) {
    a = load_pack<T, kV>(x + row * cols + p * kV);
    if constexpr (kAdd) {
      const auto d = load_pack<T, kV>(delta + row * cols + p * kV);
#pragma unroll
      for (int i = 0; i < kV; ++i) a.v[i] = from_float<T>(to_float(a.v[i]) + to_float(d.v[i]));
      store_pack<T, kV>(h + row * cols + p * kV, a);
    }
#pragma unroll
    for (int i = 0; i < kV; ++i) {
      const float f = to_float(a.v[i]);
      ss += f * f;
    }
  }
  ss = group_sum(ss, lanes);
  const float r = rsqrtf(ss / static_cast<float>(cols) + eps);
  if (!mine) return;
  if (p == 0) rstd[row] = r;
  const auto f = factor_pack<T, kV, kOne>(w, p);
  Pack<T, kV> o;
#pragma unroll
  for (int i = 0; i < kV; ++i) o.v[i] = norm_out<T, kOne>(to_float(a.v[i]), r, f.v[i]);
  store_pack<T, kV>(y + row * cols + p * kV, o);
}

// dx only (a frozen weight: the LoRA case); with dweight the block kernel above runs.
template <typename T, int kV, bool kDh, bool kOne>
__global__ void __launch_bounds__(kNarrowThreads)
    rms_norm_backward_rows_kernel(const T* __restrict__ dy, const T* __restrict__ h, const void* __restrict__ w,
                                  const float* __restrict__ rstd, const T* __restrict__ dres, T* __restrict__ dx,
                                  int64_t rows, int64_t cols, int lanes) {
  const int64_t row = int64_t{blockIdx.x} * (kNarrowThreads / lanes) + threadIdx.x / lanes;
  const int64_t p = threadIdx.x % lanes;
  const bool mine = row < rows && p < cols / kV;
  const int64_t at = row * cols + p * kV;
  Pack<T, kV> g{}, a{};
  Pack<float, kV> f{};
  float r = 0.f, dot = 0.f;
  if (mine) {
    r = rstd[row];
    g = load_pack<T, kV>(dy + at);
    a = load_pack<T, kV>(h + at);
    f = factor_pack<T, kV, kOne>(w, p);
#pragma unroll
    for (int i = 0; i < kV; ++i) dot += dn_of<T, kOne>(to_float(g.v[i]), f.v[i]) * (to_float(a.v[i]) * r);
  }
  dot = group_sum(dot, lanes) / static_cast<float>(cols);
  if (!mine) return;
  Pack<T, kV> e;
  if constexpr (kDh) e = load_pack<T, kV>(dres + at);
  store_pack<T, kV>(dx + at, dx_pack<T, kV, kDh, kOne>(g, a, f, e, r, dot));
}

// The lanes a row gets on the narrow kernels (a power of two >= its packs), or 0: a block a row.
int narrow_lanes(int64_t packs, bool allowed) {
  if (!allowed || packs > 32) return 0;
  int lanes = 1;
  while (lanes < packs) lanes *= 2;
  return lanes;
}

int64_t narrow_blocks(int64_t rows, int lanes) {
  const int64_t per_block = kNarrowThreads / lanes;
  return (rows + per_block - 1) / per_block;
}

// out[c] = T(sum over parts of partial[part, c]), in a fixed order. Block 32 x kSumRows.
template <typename T>
__global__ void __launch_bounds__(32 * kSumRows)
    column_sum_kernel(const float* __restrict__ partial, int64_t parts, int64_t cols, T* __restrict__ out) {
  __shared__ float tile[kSumRows][33];
  const int64_t col = int64_t{blockIdx.x} * 32 + threadIdx.x;
  float s = 0.f;
  if (col < cols)
    for (int64_t p = threadIdx.y; p < parts; p += kSumRows) s += partial[p * cols + col];
  tile[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    for (int j = 1; j < kSumRows; ++j) s += tile[j][threadIdx.x];
    out[col] = from_float<T>(s);
  }
}

void check_sizes(const char* kernel, int64_t rows, int64_t cols) {
  if (rows < 0 || cols <= 0) fail(kernel, "rows must be >= 0 and cols > 0");
  if (cols > kRmsNormMaxCols) fail(kernel, "cols above kRmsNormMaxCols");
  if (rows > int64_t{0x7fffffff}) fail(kernel, "more than 2^31-1 rows");
}

template <typename T, int kV, bool kOne>
void forward_typed(const RmsNormForwardArgs& a, cudaStream_t s) {
  const auto* x = static_cast<const T*>(a.x);
  const auto* d = static_cast<const T*>(a.delta);
  auto* h = static_cast<T*>(a.h);
  auto* y = static_cast<T*>(a.y);
  if (const int lanes = narrow_lanes(a.cols / kV, a.narrow_rows)) {
    const dim3 grid(static_cast<unsigned>(narrow_blocks(a.rows, lanes))), block(kNarrowThreads);
    auto* k = a.delta ? &rms_norm_forward_rows_kernel<T, kV, true, kOne> : &rms_norm_forward_rows_kernel<T, kV, false, kOne>;
    LF_LAUNCH(k, grid, block, 0, s, x, d, a.weight, h, y, a.rstd, a.rows, a.cols, lanes, a.eps);
    return;
  }
  const dim3 grid(static_cast<unsigned>(a.rows)), block(static_cast<unsigned>(threads_for(a.cols / kV)));
  auto* k = a.delta ? &rms_norm_forward_kernel<T, kV, true, kOne> : &rms_norm_forward_kernel<T, kV, false, kOne>;
  LF_LAUNCH(k, grid, block, 0, s, x, d, a.weight, h, y, a.rstd, a.cols, a.eps);
}

template <typename T, int kV, bool kDw, bool kDh, bool kOne>
void backward_launch(const RmsNormBackwardArgs& a, cudaStream_t s, int64_t blocks) {
  auto* k = &rms_norm_backward_kernel<T, kV, kDw, kDh, kOne>;
  const size_t smem = kDw ? static_cast<size_t>(a.cols) * sizeof(float) : 0;
  LF_LAUNCH(k, dim3(static_cast<unsigned>(blocks)), dim3(static_cast<unsigned>(threads_for(a.cols / kV))), smem, s,
            static_cast<const T*>(a.dy), static_cast<const T*>(a.h), a.weight, a.rstd, static_cast<const T*>(a.dh),
            static_cast<T*>(a.dx), a.workspace, a.rows, a.cols);
}

// dweight's column sums, in the weight's dtype: T, or float32 for Gemma's norm.
template <typename W>
void column_sum(const RmsNormBackwardArgs& a, cudaStream_t s, int64_t blocks) {
  auto* k = &column_sum_kernel<W>;
  LF_LAUNCH(k, dim3(static_cast<unsigned>((a.cols + 31) / 32)), dim3(32, kSumRows), 0, s, a.workspace, blocks, a.cols,
            static_cast<W*>(a.dweight));
}

template <typename T, int kV, bool kOne>
void backward_typed(const RmsNormBackwardArgs& a, cudaStream_t s) {
  const int64_t blocks = backward_blocks(a.rows);
  const bool dw = a.dweight != nullptr, dh = a.dh != nullptr;
  // Not Gemma's scalar path: its unrounded dn let nvcc contract dx's arithmetic differently in the two kernels
  // (dx a bit apart on 20-wide rows, H100, 2026-12-05); explicit FMAs there made ptxas spill elsewhere.
  const bool narrow = a.narrow_rows && !dw && !(kOne && kV == 1);
  if (const int lanes = narrow_lanes(a.cols / kV, narrow)) {  // rows > 0: without dw, 0 returned
    auto* k = dh ? &rms_norm_backward_rows_kernel<T, kV, true, kOne> : &rms_norm_backward_rows_kernel<T, kV, false, kOne>;
    LF_LAUNCH(k, dim3(static_cast<unsigned>(narrow_blocks(a.rows, lanes))), dim3(kNarrowThreads), 0, s,
              static_cast<const T*>(a.dy), static_cast<const T*>(a.h), a.weight, a.rstd, static_cast<const T*>(a.dh),
              static_cast<T*>(a.dx), a.rows, a.cols, lanes);
    return;
  }
  if (dw && dh) backward_launch<T, kV, true, true, kOne>(a, s, blocks);
  else if (dw) backward_launch<T, kV, true, false, kOne>(a, s, blocks);
  else if (dh) backward_launch<T, kV, false, true, kOne>(a, s, blocks);
  else backward_launch<T, kV, false, false, kOne>(a, s, blocks);
  if (dw) {
    if constexpr (kOne) column_sum<float>(a, s, blocks);
    else column_sum<T>(a, s, blocks);
  }
}

}  // namespace

void rms_norm_forward(const RmsNormForwardArgs& a, Stream stream) {
  check_sizes("rms_norm_forward", a.rows, a.cols);
  if (a.rows == 0) return;
  if (!a.x || !a.weight || !a.y || !a.rstd || (a.delta && !a.h)) fail("rms_norm_forward", "null pointer");
  auto* s = static_cast<cudaStream_t>(stream);
  dispatch_dtype(a.dtype, "rms_norm_forward", [&]<typename T>() {
    constexpr int kV = 16 / sizeof(T);
    const bool packed = a.cols % kV == 0 && all_aligned16(a.x, a.delta, a.weight, a.h, a.y);
    if (a.one_plus) packed ? forward_typed<T, kV, true>(a, s) : forward_typed<T, 1, true>(a, s);
    else packed ? forward_typed<T, kV, false>(a, s) : forward_typed<T, 1, false>(a, s);
  });
  check_launch("rms_norm_forward");
}

int64_t rms_norm_backward_workspace(int64_t rows, int64_t cols) { return backward_blocks(rows) * cols; }

void rms_norm_backward(const RmsNormBackwardArgs& a, Stream stream) {
  check_sizes("rms_norm_backward", a.rows, a.cols);
  if (a.rows == 0 && !a.dweight) return;  // with dweight: one block writes the zeros
  if (!a.weight || (a.dweight && !a.workspace) || (a.rows > 0 && (!a.dy || !a.h || !a.rstd || !a.dx)))
    fail("rms_norm_backward", "null pointer");
  auto* s = static_cast<cudaStream_t>(stream);
  dispatch_dtype(a.dtype, "rms_norm_backward", [&]<typename T>() {
    constexpr int kV = 16 / sizeof(T);
    const bool packed = a.cols % kV == 0 && all_aligned16(a.dy, a.h, a.weight, a.dh, a.dx);
    if (a.one_plus) packed ? backward_typed<T, kV, true>(a, s) : backward_typed<T, 1, true>(a, s);
    else packed ? backward_typed<T, kV, false>(a, s) : backward_typed<T, 1, false>(a, s);
  });
  check_launch("rms_norm_backward");
}

}  // namespace lf::kernels
