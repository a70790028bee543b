// The transpose kernel (src/kernels/transpose.cu through transpose_op.cpp) bit for bit against ATen's
// `x.t().contiguous()`, on the GPU (kernels_test) and in the CPU emulation of the same source
// (kernels_emu_test): FP8 bytes, bf16 and fp32 elements, tiles cut by the matrix's edges (sizes that are not
// multiples of the 64-element tile), and the inputs it declines. quant::fp8 routes cuBLASLt's transposed
// layouts through it (the stored weight's input gradient, dW's columnwise casts).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "lf/kernels/transpose_op.h"
#include "gpu_timing.h"
#include "test_device.h"

namespace {

using lf::kernels::testing::emulated;
using lf::kernels::testing::gpu_ms_of;
using lf::kernels::testing::test_device;

bool device_ok() { return emulated() || at::hasCUDA(); }

// Random bits of dtype: every byte pattern (FP8 NaNs and bf16 NaNs included: the copy moves bits).
at::Tensor random_bits(int64_t rows, int64_t cols, at::ScalarType dtype) {
  const auto bytes = at::randint(0, 256, {rows, cols * static_cast<int64_t>(c10::elementSize(dtype))}).to(at::kByte);
  return bytes.view(dtype).to(test_device());
}

TEST(Transpose, EqualsAtensTransposedCopyBitForBit) {
  if (!device_ok()) GTEST_SKIP() << "no CUDA device";
  const auto kernel = lf::kernels::transpose_kernel();
  at::manual_seed(7);
  const std::vector<std::pair<int64_t, int64_t>> shapes =
      emulated() ? std::vector<std::pair<int64_t, int64_t>>{{64, 64}, {48, 80}, {144, 32}, {16, 208}}
                 : std::vector<std::pair<int64_t, int64_t>>{{3584, 18944}, {8192, 3584}, {48, 80}, {4608, 3584}, {16, 208}};
  for (const auto dtype : {at::ScalarType::Float8_e4m3fn, at::kBFloat16, at::kFloat})
    for (const auto& [rows, cols] : shapes) {
      SCOPED_TRACE(::testing::Message() << at::toString(dtype) << " " << rows << " x " << cols);
      const auto x = random_bits(rows, cols, dtype);
      at::Tensor out;
      ASSERT_TRUE(kernel(x, out));
      ASSERT_EQ(out.sizes(), (at::IntArrayRef{cols, rows}));
      ASSERT_TRUE(out.is_contiguous());
      const auto want = x.t().contiguous();
      EXPECT_TRUE(at::equal(out.cpu().view(at::kByte), want.cpu().view(at::kByte)));
    }
}

TEST(Transpose, DeclinesWhatItDoesNotTake) {
  if (!device_ok()) GTEST_SKIP() << "no CUDA device";
  const auto kernel = lf::kernels::transpose_kernel();
  const auto opts = at::TensorOptions().dtype(at::kBFloat16).device(test_device());
  at::Tensor out;
  EXPECT_FALSE(kernel(at::ones({8, 12}, opts), out));   // 12 bf16 columns: not a multiple of a 16-byte pack
  EXPECT_FALSE(kernel(at::ones({12, 8}, opts), out));   // 12 rows: out's rows would not fill packs
  EXPECT_FALSE(kernel(at::ones({32, 16}, opts).t(), out));  // not contiguous
  EXPECT_FALSE(kernel(at::ones({8, 8, 8}, opts), out));      // not 2-D
  EXPECT_FALSE(kernel(at::ones({8, 8}, opts.dtype(at::kDouble)), out));  // 8-byte elements
  if (!emulated()) EXPECT_FALSE(kernel(at::ones({8, 8}, at::kBFloat16), out));  // not on the kernels' device
  EXPECT_TRUE(kernel(at::ones({16, 8}, opts), out));
  EXPECT_EQ(out.sizes(), (at::IntArrayRef{8, 16}));
}

// Benchmark lines, not timed assertions: a 7B gate/up weight's FP8 transpose (the stored weight's input
// gradient makes one per frozen linear a step) and a bf16 activation's (dW's columnwise casts), kernel against
// ATen's strided copy, with the bytes moved per second.
TEST(Transpose, ThroughputAgainstAten) {
  if (emulated() || !at::hasCUDA()) GTEST_SKIP() << "GPU only";
  const auto kernel = lf::kernels::transpose_kernel();
  for (const auto dtype : {at::ScalarType::Float8_e4m3fn, at::kBFloat16}) {
    const int64_t rows = dtype == at::kBFloat16 ? 8192 : 18944, cols = 3584;
    const auto x = random_bits(rows, cols, dtype);
    at::Tensor out;
    const double ours = gpu_ms_of([&] { (void)kernel(x, out); });
    const double aten = gpu_ms_of([&] { (void)x.t().contiguous(); });
    const double gb = 2.0 * static_cast<double>(x.nbytes()) / 1e9;
    std::printf("TRANSPOSE %s %ldx%ld: kernel %.3f ms (%.0f GB/s) | ATen %.3f ms (%.0f GB/s) | %.1fx\n",
                at::toString(dtype), static_cast<long>(rows), static_cast<long>(cols), ours, gb / ours * 1e3, aten,
                gb / aten * 1e3, aten / ours);
  }
}

}  // namespace
