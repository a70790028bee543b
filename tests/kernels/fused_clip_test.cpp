// max_grad_norm's factor applied inside the fused CUDA AdamW (LF_FUSED_CLIP; AdamW::step's
// grad_factor) against clip_grad_norm's multiply then the step. kernels_test only: on the CPU
// the two are one code path (tests/optim/optim_test.cpp checks them bit for bit there).
// Tolerance: the kernel divides by 1 / factor (fp32) where torch multiplies: an ulp or two.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "lf/optim/adamw.h"
#include "lf/optim/grad_utils.h"
#include "../support/rel_l2_err.h"

namespace lf::optim {
namespace {

using lf::test::rel_l2_err;

TEST(FusedClip, FactorInsideTheKernelEqualsClipThenStep) {
  const auto gpu = at::TensorOptions().device(c10::DeviceType::CUDA, 0).dtype(at::kFloat);
  at::manual_seed(7);
  std::vector<at::Tensor> a, b;
  for (int64_t n : {int64_t{1} << 22, int64_t{4099}, int64_t{1}}) {
    auto p = at::randn({n}, gpu);
    a.push_back(p.clone().requires_grad_(true));
    b.push_back(p.clone().requires_grad_(true));
  }
  AdamW clipped({{a, 0.01}}, {1e-3, 0.9, 0.999, 1e-8});
  AdamW fused({{b, 0.01}}, {1e-3, 0.9, 0.999, 1e-8});
  for (int t = 1; t <= 3; ++t) {
    for (size_t i = 0; i < a.size(); ++i) {
      auto g = at::randn(a[i].sizes(), gpu);
      a[i].mutable_grad() = g.clone();
      b[i].mutable_grad() = g.clone();
    }
    const double norm = clip_grad_norm(a, 1.0);
    clipped.step();
    const auto total = global_grad_norm(b);
    ASSERT_GT(norm, 10.0) << "clipping must bite for the test to mean anything";
    EXPECT_NEAR(total.item<double>(), norm, 1e-6 * norm);
    fused.step(clip_factor(total, 1.0));
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_LT(rel_l2_err(b[i], a[i]), 1e-6) << "step " << t << " param " << i;
      EXPECT_LT(rel_l2_err(b[i].grad(), a[i].grad()), 1e-6) << "the kernel stores the clipped gradient back";
    }
  }
}

}  // namespace
}  // namespace lf::optim
