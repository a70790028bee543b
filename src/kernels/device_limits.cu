// The current device's multiprocessor count (grid sizes) and launch-error checks of the kernels.
#include <array>
#include <atomic>

#include "kernel_math.cuh"

namespace lf::kernels {

#ifdef LF_KERNELS_EMULATE
int multiprocessor_count() { return 1; }
void check_launch(const char*) {}
#else
int multiprocessor_count() {
  constexpr int kMaxDevices = 64;
  static std::array<std::atomic<int>, kMaxDevices> cache{};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) fail("multiprocessor_count", cudaGetErrorString(cudaGetLastError()));
  if (device >= 0 && device < kMaxDevices) {
    if (const int n = cache[device].load(std::memory_order_relaxed)) return n;
  }
  int n = 0;
  if (const auto err = cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device); err != cudaSuccess)
    fail("multiprocessor_count", cudaGetErrorString(err));
  if (device >= 0 && device < kMaxDevices) cache[device].store(n, std::memory_order_relaxed);
  return n;
}

void check_launch(const char* kernel) {
  if (const auto err = cudaGetLastError(); err != cudaSuccess) fail(kernel, cudaGetErrorString(err));
}
#endif

}  // namespace lf::kernels
