// The FP8 output-scaling kernel (src/kernels/fp8_output_scale.cu through fp8_output_scale_op.cpp) bit for bit
// against ATen's two in-place multiplies (quant::unit_scaled_mm without the kernel), on the GPU (kernels_test)
// and in the CPU emulation of the same source (kernels_emu_test): bf16, fp16 and fp32 outputs, row scales
// alone (a stored weight's input gradient) and rows and columns (dX and dW of full fine-tuning), powers of two
// from 2^-30 to 2^20 (rowwise scales are powers of two: the large and small ones push bf16 into its subnormals
// and overflow, where two roundings differ from one), and the shapes it declines.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "lf/kernels/fp8_output_scale_op.h"
#include "test_device.h"

namespace {

using lf::kernels::testing::emulated;
using lf::kernels::testing::test_device;

bool device_ok() { return emulated() || at::hasCUDA(); }

// Powers of two 2^e, e in [-30, 20], float32 on the test device.
at::Tensor pow2_scales(int64_t n, int64_t seed) {
  at::manual_seed(seed);
  return at::exp2(at::randint(-30, 21, {n}).to(at::kFloat)).to(test_device());
}

at::Tensor aten_scaled(at::Tensor y, const at::Tensor& rows, const at::Tensor& cols) {
  y = y.clone();
  y.mul_(rows.view({-1, 1}));
  if (cols.defined()) y.mul_(cols.view({1, -1}));
  return y;
}

TEST(Fp8OutputScale, EqualsAtensTwoMultipliesBitForBit) {
  if (!device_ok()) GTEST_SKIP() << "no CUDA device";
  const auto kernel = lf::kernels::fp8_output_scale_kernel();
  const int64_t m = emulated() ? 24 : 4096;
  for (const auto dtype : {at::kBFloat16, at::kHalf, at::kFloat})
    for (const int64_t n : {int64_t{3584}, int64_t{64}})
      for (const bool with_cols : {false, true}) {
        SCOPED_TRACE(::testing::Message() << at::toString(dtype) << " " << n << (with_cols ? " rows and columns" : " rows"));
        at::manual_seed(n);
        const auto y = (at::randn({m, n}) * 8).to(dtype).to(test_device());
        const auto rows = pow2_scales(m, 1).view({m, 1});  // [M, 1], as the GEMM's inverse row scales come
        const auto cols = with_cols ? pow2_scales(n, 2).view({1, n}) : at::Tensor();
        auto fused = y.clone();
        ASSERT_TRUE(kernel(fused, rows, cols));
        const auto want = aten_scaled(y, rows, cols);
        EXPECT_TRUE(at::equal(fused.cpu().view(at::kByte), want.cpu().view(at::kByte)));
      }
}

TEST(Fp8OutputScale, DeclinesWhatItDoesNotTake) {
  if (!device_ok()) GTEST_SKIP() << "no CUDA device";
  const auto kernel = lf::kernels::fp8_output_scale_kernel();
  const auto opts = at::TensorOptions().dtype(at::kBFloat16).device(test_device());
  const auto rows = at::ones({8}, at::TensorOptions().device(test_device()));
  auto odd = at::ones({8, 12}, opts);  // 12 bf16 columns: not a multiple of a 16-byte pack
  EXPECT_FALSE(kernel(odd, rows, at::Tensor()));
  auto wide = at::ones({8, 32}, opts);
  auto strided = wide.t();  // not contiguous
  EXPECT_FALSE(kernel(strided, rows, at::Tensor()));
  EXPECT_FALSE(kernel(wide, rows.to(at::kDouble), at::Tensor()));           // scales not float32
  EXPECT_FALSE(kernel(wide, at::ones({7}, rows.options()), at::Tensor()));  // one scale short
  auto cpu = at::ones({8, 32}, at::kBFloat16);
  if (!emulated()) EXPECT_FALSE(kernel(cpu, rows.cpu(), at::Tensor()));  // not on the kernels' device
  EXPECT_TRUE(kernel(wide, rows, at::Tensor()));
}

}  // namespace
