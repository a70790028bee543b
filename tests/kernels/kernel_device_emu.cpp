// The CPU emulation's kernel device (src/kernels/kernel_device.h): CPU tensors, no stream.
#include "kernel_device.h"

namespace lf::kernels {

bool on_kernel_device(const at::Tensor& x) { return x.is_cpu(); }

void run_on_device(const at::Tensor&, const std::function<void(Stream)>& launch) { launch(nullptr); }

}  // namespace lf::kernels
