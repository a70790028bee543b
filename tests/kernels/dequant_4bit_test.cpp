// The 4-bit dequantization kernel (src/kernels/dequant_4bit.cu) against quant::dequantize_4bit
// (bitsandbytes' CPU arithmetic): bit for bit, NF4 / FP4, with and without double quantization, to
// bf16, fp16 and fp32, on the GPU at Qwen2.5-7B's projection shapes (kernels_test) and on the CPU
// emulation at small ones (kernels_emu_test, in CI). And a QLoRA linear layer on the fused path
// (the kernel into the reused buffer, then the GEMM) against the ATen path.
#include <ATen/ATen.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <chrono>
#include <cstdio>

#include "lf/kernels/fused_ops.h"
#include "lf/model/bnb4_linear.h"
#include "lf/model/fused_dispatch.h"
#include "lf/model/kernel_paths.h"
#include "lf/model/layers.h"
#include "lf/quant/bnb_4bit.h"
#include "test_device.h"

namespace lf::kernels {
namespace {

using testing::emulated;
using testing::test_device;

std::vector<std::vector<int64_t>> shapes() {
  if (emulated()) return {{48, 64}, {40, 75}, {9, 7}};  // a partial last block, an odd count
  return {{3584, 3584}, {512, 3584}, {18944, 3584}, {3584, 18944}, {40, 75}};
}

TEST(Dequant4bit, EqualsTheExactPathBitForBit) {
  if (!emulated() && !at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  at::manual_seed(1);
  for (const auto& shape : shapes())
    for (const auto code : {quant::Code4::kNf4, quant::Code4::kFp4})
      for (const bool dq : {false, true}) {
        if (shape[0] * shape[1] > (1 << 20) && (code == quant::Code4::kNf4) != dq) continue;  // big: two variants
        quant::Bnb4Spec spec;
        spec.code = code;
        spec.double_quant = dq;
        const auto w = (at::randn(shape) * 0.02).to(at::kBFloat16);
        auto q = quant::quantize_4bit(w, spec);  // on the CPU: the reference bytes
        const auto dev = test_device();
        quant::Bnb4Tensor g = q;
        g.data = q.data.to(dev), g.absmax = q.absmax.to(dev);
        if (dq) g.nested_absmax = q.nested_absmax.to(dev), g.offset = q.offset.to(dev);
        // The exact path's fp32 products, rounded to each dtype as dequantize_4bit rounds them.
        const auto want32 = quant::dequantize_4bit(q, at::kFloat).reshape({-1});
        for (const auto dtype : {at::kBFloat16, at::kHalf, at::kFloat}) {
          SCOPED_TRACE(::testing::Message() << shape[0] << "x" << shape[1] << " " << quant::code4_name(code)
                                            << (dq ? " nested " : " ") << c10::toString(dtype));
          auto out = at::empty({q.numel()}, at::TensorOptions().dtype(dtype).device(dev));
          fused_ops().dequantize_4bit(g.data, g.absmax, g.nested_absmax, g.offset, static_cast<int64_t>(code),
                                      spec.blocksize, out);
          const auto want = want32.to(dtype);
          const auto bits = dtype == at::kFloat ? at::kInt : at::kShort;  // compare bits: +0 and -0 differ
          EXPECT_TRUE(at::equal(out.cpu().view(bits), want.view(bits)));
        }
      }
}

// A QLoRA projection (4-bit base + LoRA) on the fused path equals the ATen path: the same dequantized
// bf16 weight, so the output and the input gradient differ only by the GEMMs' summation order.
TEST(Dequant4bit, QloraLinearFusedMatchesAten) {
  if (!emulated() && !at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  at::manual_seed(2);
  const auto dev = test_device();
  const int64_t in = emulated() ? 64 : 3584, out = emulated() ? 96 : 18944, rows = emulated() ? 6 : 512;
  const auto w = (at::randn({out, in}) * 0.02).to(at::kBFloat16).to(dev);
  model::Linear lin;
  lin.format_ = model::make_bnb4_linear(quant::quantize_4bit(w, quant::Bnb4Spec{}), at::kBFloat16);
  auto lora = std::make_unique<model::LoraWeights>();
  lora->a_ = (at::randn({8, in}) * 0.05).to(dev).requires_grad_(true);
  lora->b_ = (at::randn({out, 8}) * 0.05).to(dev).requires_grad_(true);
  lora->scaling_ = 2.0;
  lin.lora_ = std::move(lora);
  const auto x0 = (at::randn({rows, in}) * 0.5).to(at::kBFloat16).to(dev);
  const auto g = (at::randn({rows, out}) * 0.5).to(at::kBFloat16).to(dev);
  auto run = [&](bool fused) {
    model::set_fused_ops(fused ? &fused_ops() : nullptr);
    auto x = x0.clone().requires_grad_(true);
    auto y = lin.forward(x, true);
    torch::autograd::backward({y}, {g});
    model::set_fused_ops(nullptr);
    return std::make_pair(y.detach().to(at::kFloat), x.grad().to(at::kFloat));
  };
  const auto [y1, dx1] = run(true);
  const auto [y0, dx0] = run(false);
  auto rel = [](const at::Tensor& a, const at::Tensor& b) { return ((a - b).norm() / b.norm()).item<double>(); };
  EXPECT_LT(rel(y1, y0), 1e-2);
  EXPECT_LT(rel(dx1, dx0), 1e-2);
}

// The few-row fused GEMM (dequant_gemv_4bit.cu) against dequantize + GEMM: the same bf16-rounded weights,
// fp32 sums in another order; 1, 3, 8 rows (one launch) and 13 (two).
model::Linear quantized_linear(int64_t out, int64_t in, bool nested) {
  model::Linear lin;
  quant::Bnb4Spec spec;
  spec.double_quant = nested;
  const auto w = (at::randn({out, in}) * 0.02).to(at::kBFloat16).to(test_device());
  lin.format_ = model::make_bnb4_linear(quant::quantize_4bit(w, spec), at::kBFloat16);
  return lin;
}

at::Tensor forward_with(const model::Linear& lin, const at::Tensor& x, const std::string& gemm) {
  config::KernelPaths k;
  k.quant_gemm = gemm;
  const model::ScopedKernelPaths paths(k);
  model::set_fused_ops(&fused_ops());
  auto y = lin.forward(x, false);
  model::set_fused_ops(nullptr);
  return y;
}

TEST(Dequant4bit, FewRowsFusedGemmMatchesDequantThenGemm) {
  if (!emulated() && !at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  at::manual_seed(4);
  const int64_t in = emulated() ? 128 : 3584, out = emulated() ? 40 : 18944;
  for (const bool nested : {false, true}) {
    const auto lin = quantized_linear(out, in, nested);
    for (const int64_t rows : {1, 3, 8, 13}) {
      const auto x = (at::randn({rows, in}) * 0.5).to(at::kBFloat16).to(test_device());
      const auto fused = forward_with(lin, x, "fused").to(at::kFloat), ref = forward_with(lin, x, "dequant").to(at::kFloat);
      const double e = ((fused - ref).norm() / ref.norm()).item<double>();
      EXPECT_LT(e, 1e-2) << rows << " rows, nested " << nested;
    }
  }
}

// Not a test of speed (nothing is asserted): the two paths' times at Qwen2.5-7B's projections for a few
// row counts, for LF_QUANT_GEMM's auto rule (scripts/device/qlora_check.sh prints these lines).
TEST(Dequant4bit, MeasureBothPaths) {
  if (emulated() || !at::hasCUDA()) GTEST_SKIP() << "GPU only";
  const auto sync = [] { c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->synchronizeDevice(test_device().index()); };
  for (const auto& [out, in] : std::vector<std::pair<int64_t, int64_t>>{{3584, 3584}, {512, 3584}, {18944, 3584}, {3584, 18944}}) {
    const auto lin = quantized_linear(out, in, true);
    for (const int64_t rows : {1, 8, 64, 8192}) {
      const auto x = (at::randn({rows, in}) * 0.5).to(at::kBFloat16).to(test_device());
      double us[2];
      for (int p = 0; p < 2; ++p) {
        const char* gemm = p ? "fused" : "dequant";
        if (p && rows > 64) { us[p] = -1; continue; }  // 8 rows a launch: far from cuBLAS at thousands
        for (int i = 0; i < 3; ++i) (void)forward_with(lin, x, gemm);
        sync();
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 20; ++i) (void)forward_with(lin, x, gemm);
        sync();
        us[p] = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 20;
      }
      std::printf("QGEMM [%lld x %lld] rows %lld: dequant+cuBLAS %.1f us, fused %.1f us\n", (long long)out,
                  (long long)in, (long long)rows, us[0], us[1]);
    }
  }
}

}  // namespace
}  // namespace lf::kernels
