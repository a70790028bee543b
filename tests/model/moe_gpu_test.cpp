// The mixture-of-experts layer on a GPU (skipped without one): the routed experts through ATen's grouped
// GEMM (bf16, LF_GROUPED_MM=1) against one GEMM per expert (LF_GROUPED_MM=0) and against the fp32 CPU
// reference, forward and every gradient, at a shape with uneven expert loads (one expert unused); and a
// whole Qwen3-MoE fixture's logits and aux loss in bf16 on the GPU against fp32 on the CPU.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include "../support/rel_l2_err.h"
#include "lf/model/kernel_paths.h"
#include "lf/model/loader.h"
#include "lf/model/moe_experts.h"
#include "model_test_util.h"

namespace lf::model {
namespace {

struct ExpertsRun {
  at::Tensor out, dx, dgate_up, ddown, dweights;
};

// N tokens of C through top-k of E experts of I: chosen skewed (expert 0 takes most, expert E-1 none).
ExpertsRun run_experts(const at::Device& device, at::ScalarType dtype, bool grouped) {
  config::KernelPaths paths;
  paths.grouped_mm = grouped;
  const ScopedKernelPaths scoped(paths);
  const int64_t n = 1000, c = 256, e = 16, k = 4, i = 128;
  auto gen = at::globalContext().defaultGenerator(at::kCPU);
  gen.set_current_seed(7);
  const auto opts = at::TensorOptions().dtype(dtype).device(device);
  auto x = (at::randn({n, c}, gen) * 0.5).to(opts).requires_grad_();
  auto gate_up = (at::randn({e, 2 * i, c}, gen) * 0.05).to(opts).requires_grad_();
  auto down = (at::randn({e, c, i}, gen) * 0.05).to(opts).requires_grad_();
  auto logits = at::randn({n, e}, gen);
  logits.select(1, 0).add_(2.0);
  logits.select(1, e - 1).fill_(-1e9);
  auto [top, chosen] = at::topk(at::softmax(logits, -1), k, -1);
  auto weights = (top / top.sum(-1, true)).to(opts).requires_grad_();
  const auto r = route_tokens(chosen.to(device), e, grouped_experts_for(x));
  EXPECT_EQ(r.host_ends.empty(), grouped && device.is_cuda() && dtype == at::kBFloat16);
  auto out = routed_experts(x, gate_up, down, weights, r);
  const auto g = (at::randn({n, c}, gen)).to(opts);
  out.backward(g);
  return {out, x.grad(), gate_up.grad(), down.grad(), weights.grad()};
}

void expect_close(const ExpertsRun& a, const ExpertsRun& ref, double tol, const char* what) {
  EXPECT_LE(lf::test::rel_l2_err(a.out, ref.out), tol) << what << " out";
  EXPECT_LE(lf::test::rel_l2_err(a.dx, ref.dx), tol) << what << " dx";
  EXPECT_LE(lf::test::rel_l2_err(a.dgate_up, ref.dgate_up), tol) << what << " dgate_up";
  EXPECT_LE(lf::test::rel_l2_err(a.ddown, ref.ddown), tol) << what << " ddown";
  EXPECT_LE(lf::test::rel_l2_err(a.dweights, ref.dweights), tol) << what << " dweights";
}

TEST(MoeGpu, GroupedExpertsEqualPerExpertAndCpu) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const at::Device gpu(at::kCUDA, 0);
  const auto ref = run_experts(at::kCPU, at::kFloat, false);
  const auto grouped = run_experts(gpu, at::kBFloat16, true);
  const auto looped = run_experts(gpu, at::kBFloat16, false);
  expect_close(grouped, ref, 1e-2, "grouped bf16 vs fp32 CPU");
  expect_close(looped, ref, 1e-2, "per-expert bf16 vs fp32 CPU");
  expect_close(grouped, looped, 1e-2, "grouped vs per-expert bf16");
  EXPECT_EQ(grouped.dgate_up[15].abs().max().item<float>(), 0.0f) << "the unused expert gets no gradient";
}

TEST(MoeGpu, Qwen3MoeLayerOnTheGpuIsTheCpus) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const auto ref = test::load_ref("qwen3_moe_ref.safetensors");
  LoadOptions gpu;
  gpu.device = at::Device(at::kCUDA, 0);
  gpu.param_dtype = at::kBFloat16;
  auto model = load_causal_lm(test::fixture("qwen3_moe_tiny").string(), gpu);
  c10::NoGradGuard no_grad;
  auto& aux = model->router_aux_loss();
  aux.begin(ref.at("attention_mask").reshape({-1}).to(gpu.device), 0.0);
  const auto logits = model->forward(ref.at("input_ids").to(gpu.device));
  EXPECT_LE(lf::test::rel_l2_err(logits, ref.at("logits")), 3e-2);
  EXPECT_NEAR(aux.value().item<double>(), ref.at("aux.aux_loss").item<double>(), 2e-2);
  aux.end();
}

}  // namespace
}  // namespace lf::model
