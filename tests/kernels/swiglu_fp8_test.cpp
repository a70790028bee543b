// The fused SwiGLU + rowwise FP8 cast (src/kernels/swiglu_fp8.cu through swiglu_fp8_op.cpp) bit for bit against
// the two kernels it replaces, the SwiGLU kernel and then the FP8 cast kernel on its output (and ATen's cast),
// in both builds: the GPU (kernels_test) and the CPU emulation of the same sources (kernels_emu_test). Rows of
// 7B's intermediate size (18,944: a block a row), 3,584 (a block a row) and 1,024 (a warp a row), with each
// row's amax on its first or last column, a zero row and large magnitudes; the same gradients as swiglu's;
// and an MLP whose down_proj is stored in FP8 rowwise reading the seeded cast instead of casting act again.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include "lf/kernels/fp8_cast_op.h"
#include "lf/kernels/fused_ops.h"
#include "lf/model/fp8_linear.h"
#include "lf/model/fused_dispatch.h"
#include "lf/model/layers.h"
#include "lf/quant/fp8.h"
#include "test_device.h"

namespace lf::kernels {
namespace {

using quant::Fp8Recipe;
using testing::emulated;
using testing::test_device;

bool device() { return emulated() || at::hasCUDA(); }

// gate and up [2, rows / 2, cols] bf16: row 0's amax on its first column, row 1's on its last, row 2 all zero
// (silu(0) = 0), row 3 large (|act| ~ 3e4: the scale below 1).
std::pair<at::Tensor, at::Tensor> inputs(int64_t rows, int64_t cols) {
  at::manual_seed(cols + rows);
  auto g = at::randn({rows, cols}) * 2, u = at::randn({rows, cols});
  g.index_put_({0, 0}, 4.0);
  u.index_put_({0, 0}, -40.0);
  g.index_put_({1, cols - 1}, 5.0);
  u.index_put_({1, cols - 1}, 33.0);
  g.select(0, 2).zero_();
  u.select(0, 3).mul_(1e4);
  const auto to = [&](const at::Tensor& t) { return t.to(at::kBFloat16).to(test_device()).view({2, rows / 2, cols}); };
  return {to(g), to(u)};
}

at::Tensor bits(const at::Tensor& t) {
  return t.contiguous().view(t.element_size() == 2 ? at::kShort : at::kByte).cpu();
}

TEST(SwigluFp8, EqualsSwigluThenFp8CastBitForBit) {
  if (!device()) GTEST_SKIP() << "no CUDA device";
  const int64_t rows = emulated() ? 4 : 512;
  const auto s = quant::fp8_input_scaling(Fp8Recipe::kRowwise, -1);
  for (const int64_t cols : {int64_t{18944}, int64_t{3584}, int64_t{1024}}) {
    SCOPED_TRACE(::testing::Message() << cols << " cols");
    const auto [g, u] = inputs(rows, cols);
    quant::Fp8Tensor cast;
    const auto act = fused_ops().swiglu_fp8(g, u, s, cast);
    ASSERT_TRUE(act.defined());
    const auto ref = fused_ops().swiglu(g, u);
    EXPECT_TRUE(at::equal(bits(act), bits(ref)));
    quant::Fp8Tensor kernel;
    const auto rows_scaling = quant::fp8_input_scaling(Fp8Recipe::kRowwise, 1);
    ASSERT_TRUE(fp8_cast_kernel()(ref.view({rows, cols}), at::Tensor(), rows_scaling, kernel));
    ASSERT_EQ(cast.data.sizes(), kernel.data.sizes());
    ASSERT_EQ(cast.scale.sizes(), kernel.scale.sizes());
    EXPECT_TRUE(at::equal(bits(cast.data.view(at::kByte)), bits(kernel.data.view(at::kByte))));
    EXPECT_TRUE(at::equal(cast.scale.cpu(), kernel.scale.cpu()));
    quant::set_fp8_cast_kernel(nullptr);  // and ATen's cast (torchao's)
    const auto aten = quant::fp8_cast(ref.view({rows, cols}).cpu(), rows_scaling);
    EXPECT_TRUE(at::equal(bits(cast.data.view(at::kByte)), bits(aten.data.view(at::kByte))));
    EXPECT_TRUE(at::equal(cast.scale.cpu(), aten.scale));
    // Not vacuous: the rows' scales differ (the large row's is below 1, the zero row's fmax / 1e-12 rounded down).
    const auto sc = cast.scale.cpu();
    EXPECT_LT(sc[3].item<float>(), 1.f);
    EXPECT_GT(sc[2].item<float>(), 1e12f);
    EXPECT_NE(sc[0].item<float>(), sc[3].item<float>());
  }
}

TEST(SwigluFp8, GradientsAreSwiglusAndUnsupportedInputsAreDeclined) {
  if (!device()) GTEST_SKIP() << "no CUDA device";
  const int64_t rows = 4, cols = 1024;
  const auto [g0, u0] = inputs(rows, cols);
  const auto dout = at::randn({2, rows / 2, cols}).to(at::kBFloat16).to(test_device());
  const auto s = quant::fp8_input_scaling(Fp8Recipe::kRowwise, -1);
  auto grads = [&](bool fp8) {
    auto g = g0.clone().requires_grad_(true), u = u0.clone().requires_grad_(true);
    quant::Fp8Tensor cast;
    const auto act = fp8 ? fused_ops().swiglu_fp8(g, u, s, cast) : fused_ops().swiglu(g, u);
    torch::autograd::backward({act}, {dout});
    return std::make_pair(g.grad(), u.grad());
  };
  const auto [dg, du] = grads(true);
  const auto [dg_ref, du_ref] = grads(false);
  EXPECT_TRUE(at::equal(bits(dg), bits(dg_ref)));
  EXPECT_TRUE(at::equal(bits(du), bits(du_ref)));
  quant::Fp8Tensor cast;
  EXPECT_FALSE(fused_ops().swiglu_fp8(g0.to(at::kFloat), u0.to(at::kFloat), s, cast).defined());  // 2-byte only
  EXPECT_FALSE(fused_ops().swiglu_fp8(g0, u0, quant::fp8_input_scaling(Fp8Recipe::kTensorwise, -1), cast).defined());
  EXPECT_FALSE(fused_ops().swiglu_fp8(g0.narrow(-1, 0, 100), u0.narrow(-1, 0, 100), s, cast).defined());  // 100 % 8
  EXPECT_FALSE(cast.data.defined());
}

// Counts the FP8 casts; declines each (ATen casts).
int casts = 0;
bool count_cast(const at::Tensor&, const at::Tensor&, const quant::Fp8Scaling&, quant::Fp8Tensor&) {
  ++casts;
  return false;
}

// An MLP with its three projections stored in FP8 rowwise: on the fused path down_proj reads the cast the fused
// SwiGLU seeded (one cast a forward: x's, shared by gate and up) instead of casting act (two without the fused
// kernel), with the same output bits; tensorwise, nothing is seeded.
TEST(SwigluFp8, DownProjReadsTheSeededCast) {
  if (!device()) GTEST_SKIP() << "no CUDA device";
  const int64_t hidden = 64, inter = emulated() ? 1024 : 18944, tokens = emulated() ? 4 : 256;
  const auto dev = test_device();
  for (const auto r : {Fp8Recipe::kRowwise, Fp8Recipe::kTensorwise}) {
    SCOPED_TRACE(std::string(quant::fp8_recipe_name(r)));
    at::manual_seed(5);
    model::Mlp mlp;
    const auto w = [&](int64_t out, int64_t in) { return (at::randn({out, in}) * 0.05).to(at::kBFloat16).to(dev); };
    mlp.gate_proj_.format_ = model::make_fp8_linear(w(inter, hidden), r);
    mlp.up_proj_.format_ = model::make_fp8_linear(w(inter, hidden), r);
    mlp.down_proj_.format_ = model::make_fp8_linear(w(hidden, inter), r);
    ASSERT_EQ(model::fp8_input_recipe(mlp.down_proj_), r);
    const auto x = at::randn({1, tokens, hidden}).to(at::kBFloat16).to(dev);
    FusedOps unfused_act = fused_ops();
    unfused_act.swiglu_fp8 = nullptr;
    auto run = [&](const FusedOps& ops) {
      model::set_fused_ops(&ops);
      quant::set_fp8_cast_kernel(&count_cast);
      casts = 0;
      const auto y = mlp.forward(x.clone(), /*training=*/true);
      quant::set_fp8_cast_kernel(nullptr);
      model::set_fused_ops(nullptr);
      return std::make_pair(y, casts);
    };
    const auto [y, n] = run(fused_ops());
    const auto [y_ref, n_ref] = run(unfused_act);
    EXPECT_EQ(n_ref, 2);
    EXPECT_EQ(n, r == Fp8Recipe::kRowwise ? 1 : 2);
    EXPECT_TRUE(at::equal(bits(y), bits(y_ref)));
  }
}

}  // namespace
}  // namespace lf::kernels
