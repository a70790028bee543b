// host_copies.h: page-locked staging and events instead of torch's synchronizing copies.
#include "lf/model/host_copies.h"

#include <ATen/ATen.h>
#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>

namespace lf::model {
namespace {

bool host_to_gpu(const at::Tensor& src, const c10::Device& to) { return src.is_cpu() && to.is_cuda(); }

}  // namespace

at::Tensor to_device(const at::Tensor& t, const c10::Device& device) {
  if (!t.defined() || t.device() == device) return t;
  if (!host_to_gpu(t, device)) return t.to(device);
  return t.pin_memory().to(device, /*non_blocking=*/true);
}

void copy_from_host(at::Tensor& dst, const at::Tensor& src) {
  if (!host_to_gpu(src, dst.device())) {
    dst.copy_(src);
    return;
  }
  dst.copy_(src.pin_memory(), /*non_blocking=*/true);
}

HostScalars::HostScalars(const std::vector<at::Tensor>& values) {
  std::vector<at::Tensor> flat;
  for (const auto& v : values) flat.push_back(to_device(v.detach().reshape({-1}).to(at::kDouble), values[0].device()));
  const auto all = at::cat(flat);
  if (!all.is_cuda()) {
    host_ = all;
    return;
  }
  host_ = at::empty({all.numel()}, at::TensorOptions().dtype(at::kDouble).pinned_memory(true));
  host_.copy_(all, /*non_blocking=*/true);
  const c10::impl::VirtualGuardImpl guard(all.device().type());
  ready_ = std::make_shared<c10::Event>(all.device().type());
  ready_->record(guard.getStream(all.device()));
}

std::vector<double> HostScalars::read() const {
  if (ready_) ready_->synchronize();
  const auto c = host_.contiguous();
  const double* p = c.const_data_ptr<double>();
  return {p, p + c.numel()};
}

}  // namespace lf::model
