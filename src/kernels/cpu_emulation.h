#pragma once
// CPU emulation of the small part of CUDA the kernels use, so that their .cu sources compile as
// plain C++ (LF_KERNELS_EMULATE) and run in CI without a GPU (tests/kernels, kernels_emu_test):
// a launch runs the grid's blocks one after another, each CUDA thread of a block a fiber
// (ucontext) on the launching thread that runs until it waits at a barrier (__syncthreads, the
// warp shuffles) or ends, then the next one runs. Fibers, not a std::thread each: on CI's two cores
// the threads' futex hand-offs left the test idle most of its 100 s. Blocks in sequence make
// `static` a faithful __shared__ (one copy per block at a time); shared memory is filled with
// NaN bytes before each block, so a kernel that reads what it did not write shows it. Threads
// that wait at different barriers (a divergent __syncthreads) throw instead of hanging.
// Not a performance model; only for small test shapes. Block sizes must be multiples of 32.
// The kernels' `#pragma unroll` means nothing to the host compiler.
#pragma GCC diagnostic ignored "-Wunknown-pragmas"

#include <sys/mman.h>
#include <ucontext.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <utility>
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

// The launch being run on this thread: its fibers and the scheduler's context they return to.
struct Fiber;
struct Run {
  ucontext_t scheduler;
  std::vector<Fiber>* fibers = nullptr;
  unsigned current = 0;
  uint64_t progress = 0;  // arrivals and ends: a round of resumes without any is a deadlock
  std::function<void(unsigned)> body;
};
inline thread_local Run* running = nullptr;

inline void yield();

// std::barrier's arrive_and_wait for fibers: the last to arrive goes on, the others yield until then.
struct Barrier {
  explicit Barrier(unsigned n) : expected(n) {}
  void arrive_and_wait() {
    ++running->progress;
    if (++arrived == expected) {
      arrived = 0;
      ++generation;
      return;
    }
    for (const uint64_t g = generation; generation == g;) yield();
  }
  unsigned expected, arrived = 0;
  uint64_t generation = 0;
};

struct Warp {
  Barrier sync{32};
  uint64_t slot[32] = {};
};

struct Block {
  explicit Block(unsigned threads) : sync(threads), warps(threads / 32) {}
  Barrier sync;
  std::vector<Warp> warps;
  std::vector<unsigned char> smem;
};

struct ThreadContext {
  dim3 thread, block, block_dim, grid_dim;
  unsigned lane = 0, warp = 0;
  Block* shared = nullptr;
};

struct Fiber {
  ucontext_t context;
  ThreadContext thread;
  bool done = false;
};

// The running fiber's CUDA thread (the scheduler points it at each fiber it resumes).
inline thread_local ThreadContext* tls = nullptr;

inline void yield() { swapcontext(&(*running->fibers)[running->current].context, &running->scheduler); }

// A fiber's whole life: the launch's body for its thread index; returning resumes the scheduler (uc_link).
inline void fiber_main() {
  Run& r = *running;
  r.body(r.current);
  (*r.fibers)[r.current].done = true;
  ++r.progress;
}

// Fiber stacks, kept for the next launch: mapped once, and pages a kernel never touches cost nothing.
class Stacks {
 public:
  static constexpr size_t kBytes = 256 * 1024, kGuard = 64 * 1024;
  Stacks() = default;
  Stacks(const Stacks&) = delete;
  Stacks& operator=(const Stacks&) = delete;
  ~Stacks() {
    for (void* s : stacks_) munmap(s, kBytes);
  }
  void* get(size_t i) {
    while (stacks_.size() <= i) {
      void* s = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (s == MAP_FAILED) throw std::runtime_error("emulated launch: no memory for a thread's stack");
      mprotect(s, kGuard, PROT_NONE);  // an overflow faults instead of writing the next stack
      stacks_.push_back(s);
    }
    return static_cast<unsigned char*>(stacks_[i]) + kGuard;
  }

 private:
  std::vector<void*> stacks_;
};

// Resumes each unfinished fiber in turn until all have ended.
inline void run_fibers(Run& r, unsigned threads) {
  static thread_local Stacks stacks;
  std::vector<Fiber> fibers(threads);
  r.fibers = &fibers;
  for (unsigned i = 0; i < threads; ++i) {
    auto& c = fibers[i].context;
    getcontext(&c);
    c.uc_stack.ss_sp = stacks.get(i);
    c.uc_stack.ss_size = Stacks::kBytes - Stacks::kGuard;
    c.uc_link = &r.scheduler;
    makecontext(&c, fiber_main, 0);
  }
  Run* outer = std::exchange(running, &r);
  for (unsigned live = threads; live > 0;) {
    const uint64_t before = r.progress;
    live = 0;
    for (unsigned i = 0; i < threads; ++i) {
      if (fibers[i].done) continue;
      r.current = i;
      tls = &fibers[i].thread;
      swapcontext(&r.scheduler, &fibers[i].context);
      live += fibers[i].done ? 0 : 1;
    }
    if (live > 0 && r.progress == before) {
      running = outer;
      throw std::logic_error("emulated launch: the threads of a block wait at different barriers");
    }
  }
  running = outer;
}

inline unsigned char* dynamic_smem() { return tls->shared->smem.data(); }

template <typename T>
T shfl_xor(T v, int lane_mask) {
  static_assert(sizeof(T) <= sizeof(uint64_t));
  auto& c = *tls;
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

template <typename... P, typename... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem_bytes, A&&... args) {
  const unsigned threads = block.x * block.y * block.z;
  if (threads == 0 || threads % 32 != 0 || threads > 1024)
    throw std::invalid_argument("emulated launch: block size must be a positive multiple of 32, at most 1024");
  Block shared(threads);
  shared.smem.resize(smem_bytes + 16);
  Barrier next_block(threads);
  Run r;
  r.body = [&](unsigned tid) {
    auto& c = *tls;
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
  };
  run_fibers(r, threads);
}

}  // namespace lf::kernels::emu

#define threadIdx (::lf::kernels::emu::tls->thread)
#define blockIdx (::lf::kernels::emu::tls->block)
#define blockDim (::lf::kernels::emu::tls->block_dim)
#define gridDim (::lf::kernels::emu::tls->grid_dim)
#define __syncthreads() (::lf::kernels::emu::tls->shared->sync.arrive_and_wait())
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
