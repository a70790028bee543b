// HostPinning without CUDA: host memory is the only memory; nothing to pin.
#include "host_pinning.h"

namespace lf::parallel {

HostPinning::HostPinning(const at::Tensor&, bool) {}
HostPinning::~HostPinning() = default;
HostPinning& HostPinning::operator=(HostPinning&& other) noexcept {
  ptr_ = other.ptr_;
  other.ptr_ = nullptr;
  return *this;
}

}  // namespace lf::parallel
