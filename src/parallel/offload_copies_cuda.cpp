// OffloadCopies with CUDA (LF_WITH_CUDA builds): two pool streams and one event per unit.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <optional>
#include <vector>

#include "lf/common/cuda_event.h"
#include "offload_copies.h"

namespace lf::parallel {
namespace {

cudaStream_t current(c10::Device device) { return c10::cuda::getCurrentCUDAStream(device.index()).stream(); }

}  // namespace

struct OffloadCopies::Impl {
  c10::Device device;
  std::optional<c10::cuda::CUDAStream> down, up;  // unset: the copies queue on the caller's stream
  std::vector<CudaEvent> up_done;                 // per unit: its last copy up
};

OffloadCopies::OffloadCopies(c10::Device device, int64_t units, bool streams)
    : impl_(std::make_unique<Impl>(Impl{device, {}, {}, {}})) {
  if (!device.is_cuda() || !streams) return;
  impl_->down = c10::cuda::getStreamFromPool(false, device.index());
  impl_->up = c10::cuda::getStreamFromPool(false, device.index());
  impl_->up_done = std::vector<CudaEvent>(static_cast<size_t>(units));
}

OffloadCopies::~OffloadCopies() = default;

bool OffloadCopies::streams() const { return impl_->down.has_value(); }

void OffloadCopies::copy_down(const at::Tensor& dst, const at::Tensor& src) {
  if (!streams()) {
    dst.copy_(src, /*non_blocking=*/impl_->device.is_cuda());
    return;
  }
  const c10::cuda::CUDAGuard device_guard(impl_->device);
  CudaEvent produced;
  produced.record(current(impl_->device));
  produced.block(impl_->down->stream());
  const c10::cuda::CUDAStreamGuard guard(*impl_->down);
  dst.copy_(src, /*non_blocking=*/true);
  // The caller frees src when it likes: the allocator must not hand its block out again
  // before the down stream has read it.
  src.record_stream(*impl_->down);
}

void OffloadCopies::copy_up(int64_t unit, const at::Tensor& dst, const at::Tensor& src, bool after_caller) {
  // The fp32 staging tensor is allocated, used and freed on the up stream: stream-ordered.
  on_up(unit, [&] { dst.copy_(src.to(dst.device(), /*non_blocking=*/impl_->device.is_cuda())); }, after_caller);
}

void OffloadCopies::on_up(int64_t unit, const std::function<void()>& work, bool after_caller) {
  if (!streams()) {
    work();
    return;
  }
  const c10::cuda::CUDAGuard device_guard(impl_->device);
  if (after_caller) {
    CudaEvent queued;
    queued.record(current(impl_->device));
    queued.block(impl_->up->stream());
  }
  const c10::cuda::CUDAStreamGuard guard(*impl_->up);
  work();
  impl_->up_done.at(static_cast<size_t>(unit)).record(impl_->up->stream());
}

void OffloadCopies::wait_up(int64_t unit) {
  if (!streams()) return;
  impl_->up_done.at(static_cast<size_t>(unit)).block(current(impl_->device));
}

}  // namespace lf::parallel
