// The mixture-of-experts kernels (lf/kernels/moe.h) against the ATen path of model/moe_experts.cpp:
// the routed experts' output and every gradient with the fused ops installed and without, on the GPU
// (kernels_test) and on the CPU emulation of the same sources (kernels_emu_test). Tolerances as
// kernels_test.cpp's (relative L2: bf16 1e-2, fp32 1e-5); uneven loads, an unused expert.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "kernel_device.h"
#include "lf/kernels/fused_ops.h"
#include "lf/kernels/moe.h"
#include "lf/model/fused_dispatch.h"
#include "lf/model/moe_experts.h"
#include "test_device.h"

namespace lf::kernels {
namespace {

using testing::emulated;
using testing::test_device;

double rel(const at::Tensor& out, const at::Tensor& ref) {
  const auto o = out.detach().to(at::kCPU, at::kDouble), r = ref.detach().to(at::kCPU, at::kDouble);
  return (o - r).norm().item<double>() / std::max(r.norm().item<double>(), 1e-30);
}

struct Run {
  at::Tensor out, dx, dgate_up, ddown, dw;
};

Run experts(bool fused, at::ScalarType dtype) {
  model::set_fused_ops(fused ? &fused_ops() : nullptr);
  // The 30B-A3B layer's widths on the GPU; a few tokens under emulation (its threads are slow).
  const int64_t n = emulated() ? 13 : 4096, c = emulated() ? 64 : 2048, e = emulated() ? 8 : 128, k = emulated() ? 4 : 8,
                i = emulated() ? 32 : 768;
  auto gen = at::globalContext().defaultGenerator(at::kCPU);
  gen.set_current_seed(3);
  const auto o = at::TensorOptions().dtype(dtype).device(test_device());
  auto x = (at::randn({n, c}, gen) * 0.5).to(o).requires_grad_();
  auto gate_up = (at::randn({e, 2 * i, c}, gen) * 0.05).to(o).requires_grad_();
  auto down = (at::randn({e, c, i}, gen) * 0.05).to(o).requires_grad_();
  auto logits = at::randn({n, e}, gen);
  logits.select(1, e - 1).fill_(-1e9);  // an expert nobody chooses
  logits.select(1, 0).add_(1.5);        // one most do
  auto [top, chosen] = at::topk(at::softmax(logits, -1), k, -1);
  auto w = (top / top.sum(-1, true)).to(o).requires_grad_();
  const auto r = model::route_tokens(chosen.to(test_device()), e, model::grouped_experts_for(x));
  auto out = model::routed_experts(x, gate_up, down, w, r);
  out.backward((at::randn({n, c}, gen)).to(o));
  model::set_fused_ops(nullptr);
  return {out, x.grad(), gate_up.grad(), down.grad(), w.grad()};
}

TEST(MoeKernels, FusedCombineAndSwigluEqualTheAtenPath) {
  if (!emulated() && !at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    const double tol = dtype == at::kBFloat16 ? 1e-2 : 1e-5;
    const auto ref = experts(false, dtype), got = experts(true, dtype);
    EXPECT_LT(rel(got.out, ref.out), tol) << dtype;
    EXPECT_LT(rel(got.dx, ref.dx), tol) << dtype;
    EXPECT_LT(rel(got.dgate_up, ref.dgate_up), tol) << dtype;
    EXPECT_LT(rel(got.ddown, ref.ddown), tol) << dtype;
    EXPECT_LT(rel(got.dw, ref.dw), tol) << dtype;
  }
}

// The experts' SwiGLU in 16-byte packs: bit for bit the one-element-a-thread kernels (vectorized =
// false), forward and backward, at 30B-A3B's intermediate width (768) and a narrow one.
TEST(MoeKernels, PackedSwigluHalvesAreTheScalarKernelsBitForBit) {
  if (!emulated() && !at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  for (const auto dtype : {at::kBFloat16, at::kFloat}) {
    for (const int64_t inter : {int64_t{768}, int64_t{24}}) {
      SCOPED_TRACE(std::to_string(inter) + " " + c10::toString(dtype));
      const int64_t rows = emulated() ? 5 : 65536;
      const auto o = at::TensorOptions().dtype(dtype).device(test_device());
      const auto h = (at::randn({rows, 2 * inter}) * 3).to(o), dout = at::randn({rows, inter}).to(o);
      auto run = [&](bool vectorized) {
        auto out = at::empty({rows, inter}, o), dh = at::empty({rows, 2 * inter}, o);
        MoeSwigluArgs f{kernel_dtype(h), rows, inter, h.const_data_ptr(), out.mutable_data_ptr(), vectorized};
        MoeSwigluBackwardArgs b{kernel_dtype(h), rows, inter, h.const_data_ptr(), dout.const_data_ptr(),
                                dh.mutable_data_ptr(), vectorized};
        run_on_device(h, [&](Stream s) {
          moe_swiglu_halves(f, s);
          moe_swiglu_halves_backward(b, s);
        });
        return std::pair{out, dh};
      };
      const auto [out_ref, dh_ref] = run(false);
      const auto [out, dh] = run(true);
      EXPECT_TRUE(at::equal(out, out_ref));
      EXPECT_TRUE(at::equal(dh, dh_ref));
    }
  }
}

}  // namespace
}  // namespace lf::kernels
