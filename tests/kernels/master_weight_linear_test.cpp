// The fp32-gradient linear of full fine-tuning (master_weight_linear.h) on the GPU: its input
// gradient is the per-use cast's, its weight gradient is fp32 and closer to the exact one than
// autocast's bf16-rounded gradient. kernels_test only (at::mm's fp32 output of bf16 inputs is
// CUDA's); Linear's choice of it is covered by DecoderLayerMatchesAtenWithEveryGradientRoute.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "lf/model/master_weight_linear.h"
#include "../support/rel_l2_err.h"

namespace lf::model {
namespace {

using lf::test::rel_l2_err;

TEST(MasterWeightLinear, Fp32WeightGradientCloserToExactThanAutocasts) {
  const auto gpu = at::TensorOptions().device(c10::DeviceType::CUDA, 0);
  at::manual_seed(11);
  const auto x = at::randn({4, 512, 1536}, gpu.dtype(at::kBFloat16)).requires_grad_(true);
  const auto w = (at::randn({896, 1536}, gpu.dtype(at::kFloat)) * 0.02).requires_grad_(true);
  const auto g = at::randn({4, 512, 896}, gpu.dtype(at::kBFloat16));
  // Exact: fp64 from the same bf16 inputs and the cast weight.
  const auto x64 = x.detach().to(at::kDouble), w64 = w.detach().to(at::kBFloat16).to(at::kDouble);
  const auto g64 = g.to(at::kDouble).reshape({-1, 896});
  const auto dw_exact = g64.t().mm(x64.reshape({-1, 1536}));
  const auto dx_exact = g64.mm(w64).view(x.sizes());

  const auto y = master_weight_linear(x, w, true);
  EXPECT_EQ(y.scalar_type(), at::kBFloat16);
  EXPECT_LT(rel_l2_err(y, at::linear(x.detach(), w.detach().to(at::kBFloat16))), 1e-3);
  y.backward(g);
  const auto dw = w.grad().clone(), dx = x.grad().clone();
  EXPECT_EQ(dw.scalar_type(), at::kFloat);
  w.mutable_grad().reset();
  x.mutable_grad().reset();
  at::linear(x, w.to(at::kBFloat16)).backward(g);  // autocast's way: bf16 gradient, cast to fp32
  const double ours = rel_l2_err(dw, dw_exact), autocast = rel_l2_err(w.grad(), dw_exact);
  std::printf("note: weight gradient rel err vs fp64: fp32 GEMM %.2e, autocast (bf16) %.2e\n", ours, autocast);
  EXPECT_LT(ours, 1e-5);
  EXPECT_LT(ours, autocast);
  EXPECT_LT(rel_l2_err(dx, dx_exact), 1e-2);
  EXPECT_LT(rel_l2_err(dx, x.grad()), 1e-3) << "the input gradient is the cast's";
  // The checkpoint recompute's form: the same gradients, no output.
  w.mutable_grad().reset();
  master_weight_linear(x, w, false).backward(g);
  EXPECT_TRUE(at::equal(w.grad(), dw));
}

}  // namespace
}  // namespace lf::model
