#pragma once
// Where the ops' kernels run: one implementation for CUDA (kernel_device_cuda.cpp, the tensor's
// device and its current stream) and one for the CPU emulation (tests/kernels). Torch-only.
#include <ATen/core/Tensor.h>

#include <functional>
#include <string>

#include "lf/kernels/launch.h"

namespace lf::kernels {

// Whether x lives where this build's kernels run.
bool on_kernel_device(const at::Tensor& x);
// Runs launch(stream) with x's device current and its current stream.
void run_on_device(const at::Tensor& x, const std::function<void(Stream)>& launch);

// The launchers' dtype of a tensor (fp32, fp16 or bf16; anything else throws BackendError).
DType kernel_dtype(const at::Tensor& x);
bool is_kernel_dtype(const at::Tensor& x);
// "[2, 896] BFloat16 on cuda:0", for errors.
std::string describe(const at::Tensor& x);

}  // namespace lf::kernels
