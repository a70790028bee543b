// Activation checkpointing's lean recompute on the GPU (backward_only_linear.h): with the fused
// kernels (the fused LoRA path adds into the unwritten base output; the fused residual norm),
// in bf16, the gradients equal those of the full recompute. kernels_test only; the CPU test
// (tests/model/lean_recompute_test.cpp) counts the GEMMs and checks the ATen path.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "lf/kernels/fused_ops.h"
#include "lf/model/causal_lm.h"
#include "lf/model/fused_dispatch.h"
#include "lf/model/lora.h"
#include "../support/rel_l2_err.h"
#include "lf/model/kernel_paths.h"

namespace lf::model {
namespace {

const c10::Device kGpu(c10::DeviceType::CUDA, 0);

using lf::test::rel_l2_err;

// The gradients of every trainable parameter after one checkpointed forward and backward.
std::vector<at::Tensor> grads(bool lora, const char* lean) {
  config::KernelPaths paths;
  paths.lean_recompute = std::string(lean) == "1";
  const ScopedKernelPaths knob(paths);
  auto c = load_model_config(std::filesystem::path(LF_SOURCE_DIR) / "configs/models/qwen2.5-0.5b.json");
  c.num_layers = 2;
  c.vocab_size = 4096;
  CausalLM m(c, at::TensorOptions().device(kGpu).dtype(at::kFloat));
  m.init_random(3);
  std::vector<at::Tensor> trainable;
  if (lora) {
    LoraConfig lc;
    lc.rank = 16;
    apply_lora(m, lc);
    at::manual_seed(4);
    c10::NoGradGuard no_grad;
    for (auto& l : m.layers())
      for (auto& [_, lin] : l.linears()) lin->lora_->b_.normal_(0, 0.02);  // B = 0 would give A no gradient
    for (auto& p : lora_parameters(m)) trainable.push_back(*p.tensor);
  } else {
    for (auto& p : m.named_parameters()) trainable.push_back(p.tensor->requires_grad_(true));
  }
  m.set_compute_dtype(at::kBFloat16);
  m.set_training(true);
  m.set_gradient_checkpointing(true);
  at::manual_seed(5);
  const auto ids = at::randint(c.vocab_size, {2, 512}, at::TensorOptions().dtype(at::kLong).device(kGpu));
  const auto probe = at::randn({c.hidden_size}, at::TensorOptions().device(kGpu)) * 1e-2;
  (m.hidden_states(ids).to(at::kFloat) * probe).sum().backward();
  std::vector<at::Tensor> out;
  // Undefined where nothing reaches the parameter (hidden_states leaves out the final norm).
  for (auto& t : trainable) out.push_back(t.grad().defined() ? t.grad().clone() : at::Tensor());
  return out;
}

TEST(LeanRecomputeGpu, FusedLayersGiveTheFullRecomputesGradients) {
  const auto* installed = fused_ops_for(at::zeros({1}, at::TensorOptions().device(kGpu).dtype(at::kBFloat16)));
  set_fused_ops(&kernels::fused_ops());
  for (bool lora : {false, true}) {
    SCOPED_TRACE(lora ? "LoRA r16 on every projection" : "full");
    const auto full = grads(lora, "0"), lean = grads(lora, "1");
    ASSERT_EQ(full.size(), lean.size());
    double worst = 0;
    for (size_t i = 0; i < full.size(); ++i) {
      ASSERT_EQ(lean[i].defined(), full[i].defined()) << i;
      if (!full[i].defined()) continue;
      ASSERT_TRUE(at::isfinite(lean[i]).all().item<bool>()) << i << ": no garbage reaches a gradient";
      worst = std::max(worst, rel_l2_err(lean[i], full[i]));
    }
    std::printf("note: lean vs full recompute (%s): worst gradient rel err %.2e over %zu tensors\n",
                lora ? "lora" : "full", worst, full.size());
    EXPECT_LT(worst, 1e-3);  // the same bf16 GEMMs; only cuBLAS's choice for dx = g W may differ
  }
  set_fused_ops(installed);
}

}  // namespace
}  // namespace lf::model
