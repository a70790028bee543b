// FP8 training on the GPU (issue 33; kernels_test, LF_WITH_CUDA): the fused cast kernel (kernels/fp8_cast.cu)
// bit for bit against ATen's cast (quant::fp8_cast, itself torchao's: tests/quant/fp8_test.cpp), and each
// GEMM of both recipes through cuBLASLt's _scaled_mm against the product of the same FP8 operands dequantized,
// on a slice of Qwen2.5-7B's MLP with an outlier channel; FP8GEMM lines: FP8 vs bf16 GEMM throughput.
#include <ATen/ATen.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "lf/kernels/fp8_cast_op.h"
#include "lf/kernels/fp8_output_scale_op.h"
#include "lf/kernels/transpose_op.h"
#include "lf/quant/fp8.h"
#include "gpu_timing.h"

namespace {

using lf::kernels::testing::gpu_ms_of;
using lf::quant::Fp8Recipe;

bool fp8_gpu() {
  cudaDeviceProp p{};
  if (!at::hasCUDA() || cudaGetDeviceProperties(&p, 0) != cudaSuccess) return false;
  return p.major * 10 + p.minor >= 89;
}

// bf16 activations [rows, cols] with an outlier column (x64), on the GPU.
at::Tensor activations(int64_t rows, int64_t cols, uint64_t seed) {
  at::manual_seed(seed);
  auto x = at::randn({rows, cols}).to(at::kBFloat16);
  x.select(1, 5).mul_(64);
  return x.cuda();
}

TEST(Fp8Gpu, FusedCastEqualsAtenBitForBit) {
  if (!fp8_gpu()) GTEST_SKIP() << "no sm_89+ GPU";
  for (const int64_t cols : {3584, 18944, 1000}) {
    const auto x = activations(4096, cols, 1);
    for (const auto r : {Fp8Recipe::kTensorwise, Fp8Recipe::kRowwise})
      for (const bool grad : {false, true}) {
        SCOPED_TRACE(::testing::Message() << cols << " cols " << lf::quant::fp8_recipe_name(r) << (grad ? " grad" : ""));
        const auto s = grad ? lf::quant::fp8_grad_scaling(r, 1) : lf::quant::fp8_input_scaling(r, 1);
        lf::quant::set_fp8_cast_kernel(nullptr);
        const auto aten = lf::quant::fp8_cast(x, s);
        lf::quant::Fp8Tensor fused;
        ASSERT_TRUE(lf::kernels::fp8_cast_kernel()(x, at::Tensor(), s, fused));
        EXPECT_TRUE(at::equal(aten.scale, fused.scale));
        EXPECT_TRUE(at::equal(aten.data.view(at::kByte), fused.data.view(at::kByte)));
      }
  }
}

double rel(const at::Tensor& a, const at::Tensor& b) {
  return ((a.cpu().to(at::kDouble) - b.cpu().to(at::kDouble)).norm() / b.cpu().to(at::kDouble).norm()).item<double>();
}

// The product of the same FP8 operands dequantized, in float32 on the CPU: cuBLASLt's differs by its
// accumulation order and the output's rounding only. (Not ATen's CPU _scaled_mm: torch 2.11's takes
// per-tensor scales only.)
at::Tensor dequantized_product(const lf::quant::Fp8Tensor& a, const lf::quant::Fp8Tensor& b) {
  return at::mm(a.dequantize(at::kFloat).cpu(), b.dequantize(at::kFloat).cpu());
}

lf::quant::Fp8Tensor t_of(const lf::quant::Fp8Tensor& q) {
  return {q.data.t(), q.scale.dim() == 2 ? q.scale.t() : q.scale};
}

// Each GEMM of both recipes on a slice of the 7B MLP, and dW of 40 tokens (cuBLASLt wants the reduction
// dimension a multiple of 16: fp8_linear_grad_weight pads it; LLaMA-Factory's fp8 example has 40).
TEST(Fp8Gpu, ScaledMmMatchesTheDequantizedProduct) {
  if (!fp8_gpu()) GTEST_SKIP() << "no sm_89+ GPU";
  at::manual_seed(3);
  const auto w = (at::randn({1024, 3584}) * 0.02).to(at::kBFloat16).cuda();
  for (const int64_t tokens : {256, 40}) {
    const auto x = activations(tokens, 3584, 2);
    const auto g = (at::randn({tokens, 1024}) * 1e-3).to(at::kBFloat16).cuda();
    for (const auto r : {Fp8Recipe::kTensorwise, Fp8Recipe::kRowwise}) {
      SCOPED_TRACE(::testing::Message() << tokens << " tokens " << lf::quant::fp8_recipe_name(r));
      using namespace lf::quant;
      EXPECT_LT(rel(fp8_linear_forward(x, w, r),
                    dequantized_product(fp8_cast(x, fp8_input_scaling(r, 1)), t_of(fp8_cast(w, fp8_input_scaling(r, 1))))),
                1e-2);
      EXPECT_LT(rel(fp8_linear_grad_input(g, w, r),
                    dequantized_product(fp8_cast(g, fp8_grad_scaling(r, 1)), fp8_cast(w, fp8_input_scaling(r, 0)))),
                1e-2);
      EXPECT_LT(rel(fp8_linear_grad_weight(g, x, r, at::kBFloat16),
                    dequantized_product(t_of(fp8_cast(g, fp8_grad_scaling(r, 0))), fp8_cast(x, fp8_input_scaling(r, 0)))),
                1e-2);
      const auto stored = fp8_store_weight(w, r);
      EXPECT_LT(rel(fp8_stored_grad_input(g, stored, r), at::mm(g.to(at::kFloat), w.to(at::kFloat))), 0.06);
    }
  }
}

// rowwise_with_gw_hp on the GPU: the input gradient from g rowwise and W under one scale (the two folded into g's
// row scales), against the dequantized product; the weight gradient is the bf16 GEMM itself, bit for bit.
TEST(Fp8Gpu, RowwiseWithHighPrecisionWeightGradient) {
  if (!fp8_gpu()) GTEST_SKIP() << "no sm_89+ GPU";
  using namespace lf::quant;
  at::manual_seed(5);
  const auto r = Fp8Recipe::kRowwiseGwHp;
  const auto w = (at::randn({1024, 3584}) * 0.02).to(at::kBFloat16).cuda();
  const auto x = activations(256, 3584, 2);
  const auto g = (at::randn({256, 1024}) * 1e-3).to(at::kBFloat16).cuda();
  auto ws = fp8_input_scaling(r, 0);
  ws.rowwise = false;
  const auto dx_ref = dequantized_product(fp8_cast(g, fp8_grad_scaling(r, 1)), fp8_cast(w, ws));
  EXPECT_LT(rel(fp8_linear_grad_input(g, w, r), dx_ref), 1e-2);
  EXPECT_TRUE(fp8_linear_grad_weight(g, x, r, at::kBFloat16).equal(at::mm(g.t(), x)));
  EXPECT_TRUE(fp8_linear_forward(x, w, r).equal(fp8_linear_forward(x, w, Fp8Recipe::kRowwise)));
}

// A benchmark line, not a timed assertion: the forward GEMM at 7B's gate/up shape, FP8 (casts included)
// against bf16, and the cast alone.
TEST(Fp8Gpu, GemmThroughput) {
  if (!fp8_gpu()) GTEST_SKIP() << "no sm_89+ GPU";
  lf::quant::set_fp8_cast_kernel(lf::kernels::fp8_cast_kernel());
  const auto x = activations(8192, 3584, 4);
  const auto w = (at::randn({18944, 3584}, x.options().dtype(at::kFloat)) * 0.02).to(at::kBFloat16);
  const double flop = 2.0 * 8192 * 3584 * 18944;
  const double bf16 = gpu_ms_of([&] { (void)at::mm(x, w.t()); });
  for (const auto r : {Fp8Recipe::kTensorwise, Fp8Recipe::kRowwise}) {
    const auto stored = lf::quant::fp8_store_weight(w, r);
    const double fp8 = gpu_ms_of([&] { (void)lf::quant::fp8_stored_forward(x, stored, r); });
    const double cast = gpu_ms_of([&] { (void)lf::quant::fp8_cast(x, lf::quant::fp8_input_scaling(r, 1)); });
    std::printf("FP8GEMM %s 8192x3584x18944: fp8 %.3f ms (%.0f TFLOP/s, cast %.3f ms) | bf16 %.3f ms (%.0f TFLOP/s) | %.2fx\n",
                std::string(lf::quant::fp8_recipe_name(r)).c_str(), fp8, flop / fp8 / 1e9, cast, bf16,
                flop / bf16 / 1e9, bf16 / fp8);
  }
  lf::quant::set_fp8_cast_kernel(nullptr);
}

// torchao's two steps for rowwise operands without fast accumulation (addmm_float8_unwrapped): the GEMM with
// unit scales, then the output times a's inverse row scales and b's inverse column scales (if any).
at::Tensor torchao_two_steps(const at::Tensor& ad, const at::Tensor& bd, const at::Tensor& post_a,
                             const at::Tensor& post_b) {
  const auto one = at::ones({}, post_a.options());
  auto y = at::_scaled_mm(ad, bd, one, one, std::nullopt, std::nullopt, at::kBFloat16, false);
  y.mul_(post_a);
  return post_b.defined() ? y.mul_(post_b) : y;
}

// Where train/fp8_device.cpp turns the scales-in-GEMM path on: sm_90 with CUDA 12.9+ (ATen's rowwise _scaled_mm
// is cuBLASLt's outer-vector scaling there; CUTLASS's kernel elsewhere).
bool outer_vector_scaling() {
  cudaDeviceProp p{};
  return cudaGetDeviceProperties(&p, 0) == cudaSuccess && p.major == 9 && p.minor == 0 &&
         at::detail::getCUDAHooks().versionCUDART() >= 12090;
}

// The kernels and the switch this file's tests install, reset however a test ends.
struct InstalledKernels {
  explicit InstalledKernels(bool scales_in_gemm) {
    lf::quant::set_fp8_cast_kernel(lf::kernels::fp8_cast_kernel());
    lf::quant::set_fp8_scale_kernel(lf::kernels::fp8_output_scale_kernel());
    lf::quant::set_transpose_kernel(lf::kernels::transpose_kernel());
    lf::quant::set_fp8_rowwise_scales_in_gemm(scales_in_gemm);
  }
  ~InstalledKernels() {
    lf::quant::set_fp8_cast_kernel(nullptr);
    lf::quant::set_fp8_scale_kernel(nullptr);
    lf::quant::set_transpose_kernel(nullptr);
    lf::quant::set_fp8_rowwise_scales_in_gemm(false);
  }
};

// With the scales in the GEMM (quant/fp8.cpp's rowwise_exact_accum_mm), lf-train's rowwise GEMMs without fast
// accumulation are bit for bit torchao's two steps: at 7B's down_proj input gradient (g [8192, 18944] by the
// stored W [18944, 3584]), at 40 tokens (LLaMA-Factory's fp8 example), and for full fine-tuning's weight
// gradient (both operands scaled; 40 tokens: padded to 48). FP8DGRAD line: the three GEMMs alone (a benchmark
// line, not a timed assertion), and how many outputs fast accumulation changes. Elsewhere than sm_90 with CUDA
// 12.9+ the switch stays off in training, and the line is printed without the equality.
TEST(Fp8Gpu, RowwiseScaledGemmIsTorchaosTwoSteps) {
  if (!fp8_gpu()) GTEST_SKIP() << "no sm_89+ GPU";
  const bool exact_here = outer_vector_scaling();
  InstalledKernels installed(/*scales_in_gemm=*/true);
  using namespace lf::quant;
  const auto r = Fp8Recipe::kRowwise;
  const auto w = (at::randn({18944, 3584}, at::TensorOptions().dtype(at::kFloat)) * 0.02).to(at::kBFloat16).cuda();
  const auto stored = fp8_store_weight(w, r);  // W [N, K] = [18944, 3584]: dx = g W
  const auto bd = stored.data.t().contiguous().t();  // column-major [18944, 3584]
  for (const int64_t tokens : {8192, 40}) {
    SCOPED_TRACE(::testing::Message() << tokens << " tokens");
    const auto g = activations(tokens, 18944, 5).mul(1e-3);
    const auto ours = fp8_stored_grad_input(g, stored, r);
    const auto folded = stored.scale.reciprocal().t().to(g.scalar_type());  // W's row scales, into g's columns
    const auto ga = fp8_cast_scaled_columns(g, folded, fp8_grad_scaling(r, 1));
    const auto ai = ga.scale.reciprocal();
    const auto theirs = torchao_two_steps(ga.data, bd, ai, at::Tensor());
    if (exact_here) {
      EXPECT_TRUE(at::equal(ours, theirs)) << at::ne(ours, theirs).sum().item<int64_t>() << " differ";
    }
    if (tokens != 8192) continue;
    const auto ones = at::ones({1, bd.size(1)}, ai.options());
    const double flop = 2.0 * 8192 * 3584 * 18944;
    at::Tensor fast;
    const double in_ms = gpu_ms_of([&] {
      (void)at::_scaled_mm(ga.data, bd, ai, ones, std::nullopt, std::nullopt, at::kBFloat16, false);
    });
    const double two_ms = gpu_ms_of([&] { (void)torchao_two_steps(ga.data, bd, ai, at::Tensor()); });
    const double fast_ms = gpu_ms_of([&] {
      fast = at::_scaled_mm(ga.data, bd, ai, ones, std::nullopt, std::nullopt, at::kBFloat16, true);
    });
    std::printf("FP8DGRAD rowwise 8192x18944x3584 (sm_90 + CUDA 12.9+: %s): scales in the GEMM %.3f ms (%.0f "
                "TFLOP/s) | torchao's two steps %.3f ms | fast accumulation %.3f ms (%lld outputs differ)\n",
                exact_here ? "yes" : "no", in_ms, flop / in_ms / 1e9, two_ms, fast_ms,
                static_cast<long long>(at::ne(fast, ours).sum().item<int64_t>()));
  }
  // dW = g^T x, both operands cast along the tokens (fp8_linear_grad_weight), against the same two steps.
  for (const int64_t tokens : {8192, 40}) {
    SCOPED_TRACE(::testing::Message() << "dW, " << tokens << " tokens");
    const auto x = activations(tokens, 3584, 6);
    const auto gd = activations(tokens, 3584, 7).mul(1e-3);
    const auto dw = fp8_linear_grad_weight(gd, x, r, at::kBFloat16);
    const int64_t pad = (16 - tokens % 16) % 16;  // fp8_linear_grad_weight's zero rows
    const auto gp = at::constant_pad_nd(gd, {0, 0, 0, pad}, 0), xp = at::constant_pad_nd(x, {0, 0, 0, pad}, 0);
    const auto gt = fp8_cast(gp.t().contiguous(), fp8_grad_scaling(r, 1));   // [N, M]: g's columns
    const auto xc = fp8_cast(xp.t().contiguous(), fp8_input_scaling(r, 1));  // [K, M]: x's columns
    const auto ref = torchao_two_steps(gt.data, xc.data.t(), gt.scale.reciprocal(), xc.scale.reciprocal().t());
    if (exact_here) {
      EXPECT_TRUE(at::equal(dw, ref)) << at::ne(dw, ref).sum().item<int64_t>() << " differ";
    }
    EXPECT_LT(rel(dw, ref), 1e-2);
  }
}

}  // namespace
