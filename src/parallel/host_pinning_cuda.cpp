// HostPinning with the CUDA runtime (LF_WITH_CUDA builds).
#include <cuda_runtime_api.h>

#include "host_pinning.h"
#include "lf/common/error.h"

namespace lf::parallel {

HostPinning::HostPinning(const at::Tensor& host, bool for_gpu) {
  if (!for_gpu || host.nbytes() == 0) return;
  LF_CHECK(host.is_cpu() && host.is_contiguous(), BackendError, "HostPinning: a contiguous CPU tensor expected");
  const auto rc = cudaHostRegister(host.data_ptr(), host.nbytes(), cudaHostRegisterDefault);
  LF_CHECK(rc == cudaSuccess, ConfigError,
           "offload: page-locking {:.2f} GiB of host memory failed: {} (check `ulimit -l` and the host's free memory; "
           "or offload less: offload: optimizer, or more GPUs)",
           static_cast<double>(host.nbytes()) / (1 << 30), cudaGetErrorString(rc));
  ptr_ = host.data_ptr();
}

HostPinning::~HostPinning() {
  if (ptr_) cudaHostUnregister(ptr_);
}

HostPinning& HostPinning::operator=(HostPinning&& other) noexcept {
  if (this != &other) {
    if (ptr_) cudaHostUnregister(ptr_);
    ptr_ = other.ptr_;
    other.ptr_ = nullptr;
  }
  return *this;
}

}  // namespace lf::parallel
