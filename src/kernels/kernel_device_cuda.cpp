// CUDA: the tensor's device and its current stream (see kernel_device.h).
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "kernel_device.h"

namespace lf::kernels {

bool on_kernel_device(const at::Tensor& x) { return x.is_cuda(); }

void run_on_device(const at::Tensor& x, const std::function<void(Stream)>& launch) {
  const c10::cuda::CUDAGuard guard(x.device());
  launch(c10::cuda::getCurrentCUDAStream(x.device().index()).stream());
}

}  // namespace lf::kernels
