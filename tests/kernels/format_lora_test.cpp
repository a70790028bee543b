// LoRA over a stored number format (4-bit NF4, FP8 e4m3 rowwise and tensorwise), with a frozen bias, as one autograd node on
// the fused path (model/format_lora_linear.h) against the separate nodes of the ATen path: the node is
// the one autograd records, and the output, x's gradient and the adapters' gradients agree to the
// GEMMs' summation order and one rounding fewer. On the GPU at a Qwen2.5-7B projection (kernels_test),
// on the CPU emulation at a small one (kernels_emu_test, in CI).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>

#include <functional>
#include <string>

#include "lf/kernels/fused_ops.h"
#include "lf/model/bnb4_linear.h"
#include "lf/model/fp8_linear.h"
#include "lf/model/fused_dispatch.h"
#include "lf/model/layers.h"
#include "lf/quant/bnb_4bit.h"
#include "test_device.h"

namespace lf::kernels {
namespace {

using testing::emulated;
using testing::test_device;

struct Grads {
  std::string node;
  at::Tensor y, dx, da, db;
};

struct FormatCase {
  const char* name;
  std::function<std::unique_ptr<model::LinearFormat>(const at::Tensor&)> make;
  double tol;
};

std::vector<FormatCase> format_cases() {
  return {{"nf4", [](const at::Tensor& w) {
             return model::make_bnb4_linear(quant::quantize_4bit(w, quant::Bnb4Spec{}), at::kBFloat16);
           }, 1e-2},
          {"fp8 rowwise", [](const at::Tensor& w) { return model::make_fp8_linear(w, quant::Fp8Recipe::kRowwise); },
           1e-2},
          {"fp8 tensorwise",
           [](const at::Tensor& w) { return model::make_fp8_linear(w, quant::Fp8Recipe::kTensorwise); }, 1e-2}};
}

TEST(FormatLora, OneNodeOnTheFusedPathMatchesTheSeparateNodes) {
  if (!emulated() && !at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const auto dev = test_device();
  const int64_t in = emulated() ? 64 : 3584, out = emulated() ? 96 : 18944, rows = emulated() ? 32 : 4096;
  for (const auto& c : format_cases()) {
    SCOPED_TRACE(c.name);
    at::manual_seed(3);
    const auto w = (at::randn({out, in}) * 0.02).to(at::kBFloat16).to(dev);
    model::Linear lin;
    lin.format_ = c.make(w);
    lin.bias_ = (at::randn({out}) * 0.1).to(at::kBFloat16).to(dev);  // frozen (Qwen2's q/k/v have one)
    auto lora = std::make_unique<model::LoraWeights>();
    lora->a_ = (at::randn({8, in}) * 0.05).to(dev).requires_grad_(true);
    lora->b_ = (at::randn({out, 8}) * 0.05).to(dev).requires_grad_(true);
    lora->scaling_ = 2.0;
    lin.lora_ = std::move(lora);
    // [2, rows / 2, in]: the node folds and restores the leading dimensions.
    const auto x0 = (at::randn({2, rows / 2, in}) * 0.5).to(at::kBFloat16).to(dev);
    const auto g = (at::randn({2, rows / 2, out}) * 0.5).to(at::kBFloat16).to(dev);
    auto run = [&](bool fused) {
      model::set_fused_ops(fused ? &fused_ops() : nullptr);
      auto x = x0.clone().requires_grad_(true);
      auto y = lin.forward(x, true);
      const std::string node = y.grad_fn() ? y.grad_fn()->name() : "none";
      torch::autograd::backward({y}, {g});
      model::set_fused_ops(nullptr);
      Grads r{node, y.detach().to(at::kFloat), x.grad().to(at::kFloat), lin.lora_->a_.grad().clone(),
              lin.lora_->b_.grad().clone()};
      lin.lora_->a_.mutable_grad().reset();
      lin.lora_->b_.mutable_grad().reset();
      return r;
    };
    const auto fused = run(true), aten = run(false);
    EXPECT_NE(fused.node.find("FormatLoraLinear"), std::string::npos) << fused.node;
    EXPECT_EQ(aten.node.find("FormatLoraLinear"), std::string::npos) << aten.node;
    auto rel = [](const at::Tensor& a, const at::Tensor& b) { return ((a - b).norm() / b.norm()).item<double>(); };
    EXPECT_LT(rel(fused.y, aten.y), c.tol);
    EXPECT_LT(rel(fused.dx, aten.dx), c.tol);
    EXPECT_LT(rel(fused.da, aten.da), c.tol);
    EXPECT_LT(rel(fused.db, aten.db), c.tol);
    ASSERT_EQ(fused.dx.sizes(), x0.sizes());
  }
}

}  // namespace
}  // namespace lf::kernels
