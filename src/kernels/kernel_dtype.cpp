// The launchers' dtypes of tensors, and tensors described for errors.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kernel_device.h"
#include "kernel_support.h"

namespace lf::kernels {

bool is_kernel_dtype(const at::Tensor& x) {
  const auto t = x.scalar_type();
  return t == at::kFloat || t == at::kHalf || t == at::kBFloat16;
}

DType kernel_dtype(const at::Tensor& x) {
  switch (x.scalar_type()) {
    case at::kFloat: return DType::kFloat32;
    case at::kHalf: return DType::kFloat16;
    case at::kBFloat16: return DType::kBFloat16;
    default: fail("dtype", "expected a float32, float16 or bfloat16 tensor");
  }
}

std::string describe(const at::Tensor& x) {
  if (!x.defined()) return "an undefined tensor";
  return fmt::format("[{}] {} on {}", fmt::join(x.sizes(), ", "), c10::toString(x.scalar_type()), x.device().str());
}

}  // namespace lf::kernels
