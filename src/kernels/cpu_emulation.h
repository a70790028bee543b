#pragma once
// CPU emulation of the small part of CUDA the kernels use, so that their .cu sources compile as
// plain C++ (LF_KERNELS_EMULATE) and run in CI without a GPU (tests/kernels, kernels_emu_test):
// a launch runs the grid's blocks one after another, each CUDA thread of a block on its own
// std::thread, with real barriers for __syncthreads and warp shuffles. Blocks in sequence make
// `static` a faithful __shared__ (one copy per block at a time); shared memory is filled with
// NaN bytes before each block, so a kernel that reads what it did not write shows it.
// Not a performance model; only for small test shapes. Block sizes must be multiples of 32.
// The kernels' `#pragma unroll` means nothing to the host compiler.
#pragma GCC diagnostic ignored "-Wunknown-pragmas"

#include <barrier>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
using cudaStream_t = void*;

// Storage-only 16-bit floats; the kernels convert through kernel_math.cuh.
struct __nv_bfloat16 {
  uint16_t bits;
};
struct __half {
  uint16_t bits;
};

namespace lf::kernels::emu {

struct Warp {
  std::barrier<> sync{32};
  uint64_t slot[32] = {};
};

struct Block {
  explicit Block(unsigned threads) : sync(threads), warps(threads / 32) {}
  std::barrier<> sync;
  std::vector<Warp> warps;
  std::vector<unsigned char> smem;
};

struct ThreadContext {
  dim3 thread, block, block_dim, grid_dim;
  unsigned lane = 0, warp = 0;
  Block* shared = nullptr;
};

inline thread_local ThreadContext tls;

template <typename T>
T shfl_xor(T v, int lane_mask) {
  static_assert(sizeof(T) <= sizeof(uint64_t));
  auto& c = tls;
  auto& w = c.shared->warps[c.warp];
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  w.slot[c.lane] = bits;
  w.sync.arrive_and_wait();
  bits = w.slot[c.lane ^ static_cast<unsigned>(lane_mask)];
  w.sync.arrive_and_wait();
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

inline unsigned char* dynamic_smem() { return tls.shared->smem.data(); }

template <typename... P, typename... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem_bytes, A&&... args) {
  const unsigned threads = block.x * block.y * block.z;
  if (threads == 0 || threads % 32 != 0 || threads > 1024)
    throw std::invalid_argument("emulated launch: block size must be a positive multiple of 32, at most 1024");
  Block shared(threads);
  shared.smem.resize(smem_bytes + 16);
  std::barrier<> next_block(threads);
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (unsigned tid = 0; tid < threads; ++tid) {
    pool.emplace_back([&, tid] {
      auto& c = tls;
      c.thread = dim3(tid % block.x, (tid / block.x) % block.y, tid / (block.x * block.y));
      c.block_dim = block;
      c.grid_dim = grid;
      c.lane = tid % 32;
      c.warp = tid / 32;
      c.shared = &shared;
      for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
          for (unsigned bx = 0; bx < grid.x; ++bx) {
            if (tid == 0) std::memset(shared.smem.data(), 0xff, shared.smem.size());
            next_block.arrive_and_wait();
            c.block = dim3(bx, by, bz);
            kernel(args...);
            next_block.arrive_and_wait();
          }
    });
  }
  for (auto& t : pool) t.join();
}

}  // namespace lf::kernels::emu

#define threadIdx (::lf::kernels::emu::tls.thread)
#define blockIdx (::lf::kernels::emu::tls.block)
#define blockDim (::lf::kernels::emu::tls.block_dim)
#define gridDim (::lf::kernels::emu::tls.grid_dim)
#define __syncthreads() (::lf::kernels::emu::tls.shared->sync.arrive_and_wait())
#define __shfl_xor_sync(mask, v, lane_mask) (::lf::kernels::emu::shfl_xor((v), (lane_mask)))
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define LF_DYNAMIC_SHARED(type, name) type* name = reinterpret_cast<type*>(::lf::kernels::emu::dynamic_smem())
#define LF_LAUNCH(kernel, grid, block, smem, stream, ...) \
  ::lf::kernels::emu::launch((kernel), (grid), (block), (smem), __VA_ARGS__)

inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
