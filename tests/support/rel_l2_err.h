#pragma once
// ||out - ref|| / ||ref|| in double on the CPU (the relative L2 error the GPU tests' bf16
// tolerances are stated in). Tests only. Include as "../support/rel_l2_err.h".
#include <ATen/ATen.h>

#include <algorithm>

namespace lf::test {

inline double rel_l2_err(const at::Tensor& out, const at::Tensor& ref) {
  const auto o = out.detach().to(at::kCPU, at::kDouble), r = ref.detach().to(at::kCPU, at::kDouble);
  return (o - r).norm().item<double>() / std::max(r.norm().item<double>(), 1e-30);
}

}  // namespace lf::test
