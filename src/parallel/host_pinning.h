#pragma once
// Page-locks a host tensor's memory for the lifetime of this object (cudaHostRegister), so
// that copies between it and the GPU run asynchronously at full PCIe speed. Not torch's
// pinned allocator: that one rounds every allocation up to a power of two (a 2.2 GB embedding
// shard would take 4 GiB), which offloading a 7B model's state cannot afford. A no-op in a
// build without CUDA and for a run on the CPU. Internal to lf_parallel.
#include <ATen/core/Tensor.h>

namespace lf::parallel {

class HostPinning {
 public:
  HostPinning() = default;
  // Pins `host` (a contiguous CPU tensor) when `for_gpu`; ConfigError naming the size if the
  // driver refuses (RLIMIT_MEMLOCK, or the host out of memory).
  HostPinning(const at::Tensor& host, bool for_gpu);
  ~HostPinning();
  HostPinning(HostPinning&& other) noexcept : ptr_(other.ptr_) { other.ptr_ = nullptr; }
  HostPinning& operator=(HostPinning&& other) noexcept;
  HostPinning(const HostPinning&) = delete;
  HostPinning& operator=(const HostPinning&) = delete;
  bool pinned() const { return ptr_ != nullptr; }

 private:
  void* ptr_ = nullptr;
};

}  // namespace lf::parallel
