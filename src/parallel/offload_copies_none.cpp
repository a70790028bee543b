// OffloadCopies without CUDA: host memory is the only memory; each copy is a plain copy.
#include "offload_copies.h"

namespace lf::parallel {

struct OffloadCopies::Impl {};

OffloadCopies::OffloadCopies(c10::Device, int64_t, bool) {}
OffloadCopies::~OffloadCopies() = default;
void OffloadCopies::copy_down(const at::Tensor& dst, const at::Tensor& src) { dst.copy_(src); }
void OffloadCopies::copy_up(int64_t, const at::Tensor& dst, const at::Tensor& src, bool) { dst.copy_(src); }
void OffloadCopies::wait_up(int64_t) {}
void OffloadCopies::on_up(int64_t, const std::function<void()>& work, bool) { work(); }
bool OffloadCopies::streams() const { return false; }

}  // namespace lf::parallel
