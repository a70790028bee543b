// The fused SwiGLU backward + factored rowwise FP8 casts (src/kernels/swiglu_fp8_backward.cu through
// swiglu_fp8_op.cpp's swiglu_fp8_grads) bit for bit against what it replaces: swiglu's backward, then the cast
// kernel with column factors (fp8_cast_scaled_columns', as quant::fp8_stored_grad_input casts g), and ATen's cast;
// in both builds (kernels_test on the GPU, kernels_emu_test in the CPU emulation). Rows of 7B's intermediate size
// (18,944: 512 threads a row) and 3,584 (256), dout's amax on a row's first or last column, a zero row, large
// magnitudes, factors of several powers of two. Then an MLP whose three projections are stored in FP8 rowwise:
// gate's and up's input gradients read the casts the backward seeded (two casts fewer a step), same bits.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <tuple>

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

at::Tensor bf16(const at::Tensor& t) { return t.to(at::kBFloat16).to(test_device()); }

// gate, up and dout [2, rows / 2, cols]: dout's row 0 peaks on its first column, row 1 on its last, row 2 is
// zero (zero gradients: the scale fmax / 1e-12 rounded down), row 3 large (|dup| ~ 1e4: a scale below 1).
struct Inputs {
  at::Tensor gate, up, dout;
};
Inputs inputs(int64_t rows, int64_t cols) {
  at::manual_seed(cols + rows + 1);
  auto g = at::randn({rows, cols}) * 2, u = at::randn({rows, cols}), d = at::randn({rows, cols});
  g.index_put_({0, 0}, 3.0);
  d.index_put_({0, 0}, 50.0);
  g.index_put_({1, cols - 1}, 4.0);
  d.index_put_({1, cols - 1}, -60.0);
  d.select(0, 2).zero_();
  d.select(0, 3).mul_(1e4);
  const auto v = [&](const at::Tensor& t) { return bf16(t).view({2, rows / 2, cols}); };
  return {v(g), v(u), v(d)};
}

// A stored weight's row scales [cols, 1]: powers of two from 2^-6 to 2^9 (e4m3 weights' pow2 scales).
at::Tensor weight_scale(int64_t cols, int64_t seed) {
  at::manual_seed(seed);
  return at::exp2(at::randint(-6, 10, {cols, 1}).to(at::kFloat)).to(test_device());
}

at::Tensor bits(const at::Tensor& t) {
  return t.contiguous().view(t.element_size() == 2 ? at::kShort : at::kByte).cpu();
}

void expect_same_cast(const quant::Fp8Tensor& a, const quant::Fp8Tensor& b) {
  ASSERT_EQ(a.data.sizes(), b.data.sizes());
  ASSERT_EQ(a.scale.sizes(), b.scale.sizes());
  EXPECT_TRUE(at::equal(bits(a.data.view(at::kByte)), bits(b.data.view(at::kByte))));
  EXPECT_TRUE(at::equal(a.scale.cpu(), b.scale.cpu()));
}

// Counts the FP8 casts; declines each (ATen casts).
int casts = 0;
bool count_cast(const at::Tensor&, const at::Tensor&, const quant::Fp8Scaling&, quant::Fp8Tensor&) {
  ++casts;
  return false;
}

TEST(SwigluFp8Backward, EqualsSwigluBackwardThenFactoredCastsBitForBit) {
  if (!device()) GTEST_SKIP() << "no CUDA device";
  const int64_t rows = emulated() ? 4 : 512;
  const auto gs = quant::fp8_grad_scaling(Fp8Recipe::kRowwise, 1);
  for (const int64_t cols : {int64_t{18944}, int64_t{3584}}) {
    SCOPED_TRACE(::testing::Message() << cols << " cols");
    const auto in = inputs(rows, cols);
    const quant::Fp8Tensor wg{at::Tensor(), weight_scale(cols, 1)}, wu{at::Tensor(), weight_scale(cols, 2)};
    // The seeded casts are read where training reads them: inside the backward, by hooks on gate's and up's
    // gradients (before AccumulateGrad). The reuse slots are per thread, and on a GPU the autograd engine runs
    // the backward on its device thread: read from the test's thread after backward(), nothing is found there.
    quant::Fp8Tensor cg, cu;
    auto grads = [&](bool fused) {
      auto g = in.gate.clone().requires_grad_(true), u = in.up.clone().requires_grad_(true);
      if (fused) {
        g.register_hook([&](const at::Tensor& d) { cg = quant::fp8_stored_grad_cast(d, wg, Fp8Recipe::kRowwise); });
        u.register_hook([&](const at::Tensor& d) { cu = quant::fp8_stored_grad_cast(d, wu, Fp8Recipe::kRowwise); });
      }
      const auto act = fused ? fused_ops().swiglu_fp8_grads(g, u, nullptr, nullptr, wg.scale, wu.scale)
                             : fused_ops().swiglu(g, u);
      EXPECT_TRUE(act.defined());
      torch::autograd::backward({act}, {in.dout});
      return std::make_pair(g.grad(), u.grad());
    };
    // Nothing cast while the hooks read (the counter declines every cast: an unseeded read would count 2).
    quant::set_fp8_cast_kernel(&count_cast);
    casts = 0;
    const auto [dg, du] = grads(true);
    EXPECT_EQ(casts, 0);
    quant::set_fp8_cast_kernel(nullptr);
    const auto [dg_ref, du_ref] = grads(false);
    EXPECT_TRUE(at::equal(bits(dg), bits(dg_ref)));
    EXPECT_TRUE(at::equal(bits(du), bits(du_ref)));
    ASSERT_TRUE(cg.data.defined() && cu.data.defined());
    for (const auto& [cast, ref, w] : {std::tuple{cg, dg_ref, wg}, std::tuple{cu, du_ref, wu}}) {
      const auto col_mul = w.scale.reciprocal().t().to(at::kBFloat16);
      quant::Fp8Tensor kernel;
      ASSERT_TRUE(fp8_cast_kernel()(ref.view({rows, cols}), col_mul, gs, kernel));
      expect_same_cast(cast, kernel);
      const auto aten = quant::fp8_cast_scaled_columns(ref.view({rows, cols}).cpu(), col_mul.cpu(), gs);
      expect_same_cast(cast, aten);
      // Not vacuous: the rows' scales differ (the zero row's fmax / 1e-12, the large row's below 1).
      const auto sc = cast.scale.cpu();
      EXPECT_GT(sc[2].item<float>(), 1e12f);
      EXPECT_NE(sc[0].item<float>(), sc[3].item<float>());
    }
  }
}

TEST(SwigluFp8Backward, ForwardCastAndDeclinedInputs) {
  if (!device()) GTEST_SKIP() << "no CUDA device";
  const int64_t rows = 4, cols = 1024;
  const auto in = inputs(rows, cols);
  const auto ws = weight_scale(cols, 3);
  const auto s = quant::fp8_input_scaling(Fp8Recipe::kRowwise, -1);
  quant::Fp8Tensor cast, cast_ref;
  const auto act = fused_ops().swiglu_fp8_grads(in.gate, in.up, &s, &cast, ws, ws);
  const auto act_ref = fused_ops().swiglu_fp8(in.gate, in.up, s, cast_ref);
  ASSERT_TRUE(act.defined());
  EXPECT_TRUE(at::equal(bits(act), bits(act_ref)));
  expect_same_cast(cast, cast_ref);
  EXPECT_FALSE(fused_ops().swiglu_fp8_grads(in.gate, in.up, nullptr, nullptr, ws.narrow(0, 0, 8), ws).defined());
  EXPECT_FALSE(fused_ops().swiglu_fp8_grads(in.gate, in.up, nullptr, nullptr, ws, ws.to(at::kBFloat16)).defined());
  EXPECT_FALSE(fused_ops()
                   .swiglu_fp8_grads(in.gate.to(at::kFloat), in.up.to(at::kFloat), nullptr, nullptr, ws, ws)
                   .defined());
}

// gate, up and down stored in FP8 rowwise, x trained: a step casts x (forward, shared by gate and up), act
// (seeded by swiglu_fp8), dy (down's input gradient), dgate and dup (gate's and up's). The counter sees each
// rowwise gradient cast twice (fp8_cast_scaled_columns asks the kernel, then its ATen fallback fp8_cast does):
// 2 + 3 * 2 = 8 calls without the fused kernels' casts, 1 + 2 = 3 with them (act, dgate and dup not cast), the
// output and the input gradient bit-equal; tensorwise, nothing is seeded (5 either way).
TEST(SwigluFp8Backward, GateAndUpInputGradientsReadTheSeededCasts) {
  if (!device()) GTEST_SKIP() << "no CUDA device";
  const int64_t hidden = 64, inter = emulated() ? 1024 : 18944, tokens = emulated() ? 4 : 256;
  const auto dev = test_device();
  for (const auto r : {Fp8Recipe::kRowwise, Fp8Recipe::kTensorwise}) {
    SCOPED_TRACE(std::string(quant::fp8_recipe_name(r)));
    at::manual_seed(7);
    model::Mlp mlp;
    const auto w = [&](int64_t out, int64_t in) { return (at::randn({out, in}) * 0.05).to(at::kBFloat16).to(dev); };
    mlp.gate_proj_.format_ = model::make_fp8_linear(w(inter, hidden), r);
    mlp.up_proj_.format_ = model::make_fp8_linear(w(inter, hidden), r);
    mlp.down_proj_.format_ = model::make_fp8_linear(w(hidden, inter), r);
    const auto x0 = at::randn({1, tokens, hidden}).to(at::kBFloat16).to(dev);
    const auto dy = at::randn({1, tokens, hidden}).to(at::kBFloat16).to(dev);
    FusedOps unfused = fused_ops();
    unfused.swiglu_fp8 = nullptr;
    unfused.swiglu_fp8_grads = nullptr;
    auto run = [&](const FusedOps& ops) {
      model::set_fused_ops(&ops);
      quant::set_fp8_cast_kernel(&count_cast);
      casts = 0;
      auto x = x0.clone().requires_grad_(true);
      const auto y = mlp.forward(x, /*training=*/true);
      torch::autograd::backward({y}, {dy});
      quant::set_fp8_cast_kernel(nullptr);
      model::set_fused_ops(nullptr);
      return std::make_tuple(y.detach(), x.grad(), casts);
    };
    const auto [y, dx, n] = run(fused_ops());
    const auto [y_ref, dx_ref, n_ref] = run(unfused);
    EXPECT_EQ(n_ref, r == Fp8Recipe::kRowwise ? 8 : 5);
    EXPECT_EQ(n, r == Fp8Recipe::kRowwise ? 3 : 5);
    EXPECT_TRUE(at::equal(bits(y), bits(y_ref)));
    EXPECT_TRUE(at::equal(bits(dx), bits(dx_ref)));
  }
}

}  // namespace
}  // namespace lf::kernels
