// RoPE on q and k in one launch; see lf/kernels/rope.h. One thread per (row, head, pack of
// the first half): it reads its pack of both halves and of the tables, and writes both
// halves, so in place is safe. Rounds as the ATen path does (x*cos, rotate_half(x)*sin and
// their sum each in T), so the result is bit-identical to it.
#include <algorithm>

#include "kernel_math.cuh"
#include "lf/kernels/rope.h"

namespace lf::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 16;  // a grid-stride loop past this

template <typename T>
struct RopeSide {
  const T* in;
  T* out;
  int64_t heads, in_stride, out_stride;
};

template <typename T>
struct RopeParams {
  RopeSide<T> q, k;
  const T* cos;
  const T* sin;
  int64_t table_batch_stride, seq, head_dim, total;
};

template <typename T, int kV, bool kInverse>
__global__ void __launch_bounds__(kThreads) rope_kernel(RopeParams<T> p) {
  const int64_t half = p.head_dim / 2, packs = half / kV, heads = p.q.heads + p.k.heads;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < p.total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t pk = i % packs, rest = i / packs;
    const int64_t head = rest % heads, row = rest / heads;
    const bool is_q = head < p.q.heads;
    const RopeSide<T>& side = is_q ? p.q : p.k;
    const int64_t offset = (is_q ? head : head - p.q.heads) * p.head_dim + pk * kV;
    const T* in = side.in + row * side.in_stride + offset;
    T* out = side.out + row * side.out_stride + offset;
    const int64_t table = (row / p.seq) * p.table_batch_stride + (row % p.seq) * p.head_dim + pk * kV;
    const auto x1 = load_pack<T, kV>(in), x2 = load_pack<T, kV>(in + half);
    const auto c1 = load_pack<T, kV>(p.cos + table), c2 = load_pack<T, kV>(p.cos + table + half);
    const auto s1 = load_pack<T, kV>(p.sin + table), s2 = load_pack<T, kV>(p.sin + table + half);
    Pack<T, kV> y1, y2;
#pragma unroll
    for (int j = 0; j < kV; ++j) {
      const float a = to_float(x1.v[j]), b = to_float(x2.v[j]);
      if constexpr (!kInverse) {  // y1 = x1 c1 - x2 s1, y2 = x2 c2 + x1 s2
        y1.v[j] = from_float<T>(round_to<T>(a * to_float(c1.v[j])) - round_to<T>(b * to_float(s1.v[j])));
        y2.v[j] = from_float<T>(round_to<T>(b * to_float(c2.v[j])) + round_to<T>(a * to_float(s2.v[j])));
      } else {  // dx1 = dy1 c1 + dy2 s2, dx2 = dy2 c2 - dy1 s1
        y1.v[j] = from_float<T>(round_to<T>(a * to_float(c1.v[j])) + round_to<T>(b * to_float(s2.v[j])));
        y2.v[j] = from_float<T>(round_to<T>(b * to_float(c2.v[j])) - round_to<T>(a * to_float(s1.v[j])));
      }
    }
    store_pack<T, kV>(out, y1);
    store_pack<T, kV>(out + half, y2);
  }
}

template <typename T, int kV>
void rope_typed(const RopeArgs& a, cudaStream_t s) {
  RopeParams<T> p;
  p.q = {static_cast<const T*>(a.q.in), static_cast<T*>(a.q.out), a.q.heads, a.q.in_row_stride, a.q.out_row_stride};
  p.k = {static_cast<const T*>(a.k.in), static_cast<T*>(a.k.out), a.k.heads, a.k.in_row_stride, a.k.out_row_stride};
  p.cos = static_cast<const T*>(a.cos);
  p.sin = static_cast<const T*>(a.sin);
  p.table_batch_stride = a.table_batch_stride;
  p.seq = a.seq;
  p.head_dim = a.head_dim;
  p.total = a.batch * a.seq * (a.q.heads + a.k.heads) * (a.head_dim / 2 / kV);
  const int64_t blocks = std::min<int64_t>((p.total + kThreads - 1) / kThreads,
                                           int64_t{multiprocessor_count()} * kBlocksPerSm);
  if (a.inverse) {
    auto* k = &rope_kernel<T, kV, true>;
    LF_LAUNCH(k, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, s, p);
  } else {
    auto* k = &rope_kernel<T, kV, false>;
    LF_LAUNCH(k, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, s, p);
  }
}

}  // namespace

void rope(const RopeArgs& a, Stream stream) {
  if (a.batch < 0 || a.seq < 0 || a.head_dim <= 0 || a.head_dim % 2 != 0 || a.q.heads < 0 || a.k.heads < 0)
    fail("rope", "expected batch, seq, heads >= 0 and an even head_dim > 0");
  if (a.batch == 0 || a.seq == 0 || a.q.heads + a.k.heads == 0) return;
  if (!a.cos || !a.sin || (a.q.heads && (!a.q.in || !a.q.out)) || (a.k.heads && (!a.k.in || !a.k.out)))
    fail("rope", "null pointer");
  auto* s = static_cast<cudaStream_t>(stream);
  dispatch_dtype(a.dtype, "rope", [&]<typename T>() {
    constexpr int kV = 16 / sizeof(T);
    const bool vec = (a.head_dim / 2) % kV == 0 && a.q.in_row_stride % kV == 0 && a.q.out_row_stride % kV == 0 &&
                     a.k.in_row_stride % kV == 0 && a.k.out_row_stride % kV == 0 && a.table_batch_stride % kV == 0 &&
                     all_aligned16(a.q.in, a.q.out, a.k.in, a.k.out, a.cos, a.sin);
    if (vec) rope_typed<T, kV>(a, s);
    else rope_typed<T, 1>(a, s);
  });
  check_launch("rope");
}

}  // namespace lf::kernels
