// The fused FP8 cast (src/kernels/fp8_cast.cu through fp8_cast_op.cpp) bit for bit against ATen's cast
// (quant::fp8_cast without the kernel, itself torchao's: tests/quant/fp8_test.cpp), in both builds: the GPU
// (kernels_test) and the CPU emulation of the same source (kernels_emu_test, so CI checks the kernel). Rowwise
// rows of 7B's widths and the longest the kernel takes, a row at an unaligned offset (copied first), widths it
// refuses (not a multiple of 8: ATen's cast), tensorwise, e4m3 and e5m2, bf16 and float32 inputs.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "lf/kernels/fp8_cast.h"
#include "lf/kernels/fp8_cast_op.h"
#include "lf/quant/fp8.h"
#include "test_device.h"

namespace {

using lf::kernels::testing::emulated;
using lf::kernels::testing::test_device;
using lf::quant::Fp8Recipe;

bool fp8_device() {
  if (emulated()) return true;
  return at::hasCUDA();  // the cast itself needs no FP8 GEMM: any CUDA device
}

// [rows, cols] of `dtype` on the test device with an outlier column (x64) and an all-zero row.
at::Tensor activations(int64_t rows, int64_t cols, at::ScalarType dtype) {
  at::manual_seed(cols);
  auto x = at::randn({rows, cols});
  x.select(1, 5).mul_(64);
  x.select(0, rows - 1).zero_();
  return x.to(dtype).to(test_device());
}

// The kernel's cast and ATen's: the same bytes and scales; false when the kernel declined `x`.
bool kernel_equals_aten(const at::Tensor& x, const lf::quant::Fp8Scaling& s) {
  lf::quant::set_fp8_cast_kernel(nullptr);
  const auto aten = lf::quant::fp8_cast(x, s);
  lf::quant::Fp8Tensor fused;
  if (!lf::kernels::fp8_cast_kernel()(x, at::Tensor(), s, fused)) return false;
  EXPECT_TRUE(at::equal(aten.scale.cpu(), fused.scale.cpu()));
  EXPECT_TRUE(at::equal(aten.data.view(at::kByte).cpu(), fused.data.view(at::kByte).cpu()));
  return true;
}

TEST(Fp8CastKernel, EqualsAtenBitForBit) {
  if (!fp8_device()) GTEST_SKIP() << "no CUDA device";
  const int64_t rows = emulated() ? 3 : 512;
  for (const auto dtype : {at::kBFloat16, at::kFloat})
    for (const int64_t cols : {int64_t{3584}, int64_t{1000}, lf::kernels::kFp8RowMaxCols}) {
      const auto x = activations(rows, cols, dtype);
      for (const auto r : {Fp8Recipe::kRowwise, Fp8Recipe::kTensorwise})
        for (const bool grad : {false, true}) {
          SCOPED_TRACE(::testing::Message() << at::toString(dtype) << " " << cols << " cols "
                                            << lf::quant::fp8_recipe_name(r) << (grad ? " grad" : ""));
          const auto s = grad ? lf::quant::fp8_grad_scaling(r, 1) : lf::quant::fp8_input_scaling(r, 1);
          EXPECT_TRUE(kernel_equals_aten(x, s));
        }
    }
}

// The rowwise cast of g with W's row scales folded into its columns (a stored weight's input gradient):
// the kernel multiplies while it loads, with ATen's rounding of x.mul(f) in x's dtype; powers of two as the
// fold's, and arbitrary factors (the rounding then shows). Tensorwise with factors: declined.
TEST(Fp8CastKernel, ColumnFactorsEqualAtensMultiplyThenCast) {
  if (!fp8_device()) GTEST_SKIP() << "no CUDA device";
  const int64_t rows = emulated() ? 3 : 512;
  // 3,584 columns: bf16 takes the warp-a-row kernel; 18,944 (gate/up's gradients at 7B): the block-a-row one.
  for (const int64_t cols : {3584, 18944})
  for (const auto dtype : {at::kBFloat16, at::kFloat})
    for (const bool pow2 : {true, false}) {
      SCOPED_TRACE(::testing::Message() << cols << " cols " << at::toString(dtype)
                                        << (pow2 ? " powers of two" : " any factors"));
      const auto x = activations(rows, cols, dtype);
      at::manual_seed(1);
      auto f = at::rand({1, cols}).mul(8).add(0.01);
      if (pow2) f = at::exp2(at::floor(at::log2(f)).sub(12));
      f = f.to(dtype).to(x.device());
      const auto s = lf::quant::fp8_grad_scaling(Fp8Recipe::kRowwise, 1);
      lf::quant::set_fp8_cast_kernel(nullptr);
      const auto aten = lf::quant::fp8_cast_scaled_columns(x, f, s);
      lf::quant::Fp8Tensor fused;
      ASSERT_TRUE(lf::kernels::fp8_cast_kernel()(x, f, s, fused));
      EXPECT_TRUE(at::equal(aten.scale.cpu(), fused.scale.cpu()));
      EXPECT_TRUE(at::equal(aten.data.view(at::kByte).cpu(), fused.data.view(at::kByte).cpu()));
      // Not vacuous: the factors changed the cast.
      EXPECT_FALSE(at::equal(aten.data.view(at::kByte).cpu(), lf::quant::fp8_cast(x, s).data.view(at::kByte).cpu()));
    }
  lf::quant::Fp8Tensor out;
  const auto x = activations(3, 3584, at::kBFloat16);
  EXPECT_FALSE(lf::kernels::fp8_cast_kernel()(x, at::ones({1, 3584}, x.options()),
                                              lf::quant::fp8_grad_scaling(Fp8Recipe::kTensorwise, 1), out));
  // float factors one element into their storage: the kernel reads them 32 bytes at a time, so the op copies them.
  const auto xf = activations(3, 3584, at::kFloat);
  const auto f = at::rand({1 + 3584}, xf.options()).add(0.5).narrow(0, 1, 3584);
  ASSERT_NE(reinterpret_cast<uintptr_t>(f.const_data_ptr()) % 32, 0u);
  const auto s = lf::quant::fp8_grad_scaling(Fp8Recipe::kRowwise, 1);
  lf::quant::set_fp8_cast_kernel(nullptr);
  const auto aten = lf::quant::fp8_cast_scaled_columns(xf, f, s);
  ASSERT_TRUE(lf::kernels::fp8_cast_kernel()(xf, f, s, out));
  EXPECT_TRUE(at::equal(aten.data.view(at::kByte).cpu(), out.data.view(at::kByte).cpu()));
}

TEST(Fp8CastKernel, UnalignedRowsAreCopiedAndOddWidthsLeftToAten) {
  if (!fp8_device()) GTEST_SKIP() << "no CUDA device";
  const auto s = lf::quant::fp8_input_scaling(Fp8Recipe::kRowwise, 1);
  // A contiguous view one element into its storage: not 32-byte aligned, the op copies it first.
  const auto flat = activations(1, 1 + 3 * 3584, at::kBFloat16).view({-1});
  const auto unaligned = flat.narrow(0, 1, 3 * 3584).view({3, 3584});
  ASSERT_NE(reinterpret_cast<uintptr_t>(unaligned.const_data_ptr()) % 32, 0u);
  EXPECT_TRUE(kernel_equals_aten(unaligned, s));
  // 100 columns: not a multiple of the kernel's packs of 8, so it declines and ATen casts.
  EXPECT_FALSE(kernel_equals_aten(activations(3, 100, at::kBFloat16), s));
}

}  // namespace
