// Activation checkpointing's lean recompute (checkpointing.h, backward_only_linear.h): the
// backward runs two projections a layer fewer forward (o_proj, down_proj), and the gradients
// stay those of the full recompute.
#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>

#include <atomic>

#include "lf/model/backward_only_linear.h"
#include "lf/model/loader.h"
#include "lf/model/lora.h"
#include "lf/model/loss.h"
#include "lf/model/kernel_paths.h"
#include "model_test_util.h"

namespace lf::model {
namespace {
using test::fixture;
using test::load_ref;
using test::rel_err;

std::atomic<int> g_linears{0};

// Counts aten::linear calls (a forward projection) while it lives, on every thread.
class LinearCounter {
 public:
  LinearCounter() {
    g_linears = 0;
    handle_ = at::addGlobalCallback(at::RecordFunctionCallback([](const at::RecordFunction& fn)
                                                                   -> std::unique_ptr<at::ObserverContext> {
                                      if (std::string_view(fn.name()) == "aten::linear") ++g_linears;
                                      return nullptr;
                                    }).scopes({at::RecordScope::FUNCTION}));
  }
  ~LinearCounter() { at::removeCallback(handle_); }
  int count() const { return g_linears.load(); }

 private:
  at::CallbackHandle handle_;
};

struct Run {
  int backward_linears = 0;
  std::vector<at::Tensor> grads;
};

// One checkpointed forward and backward of the tiny Qwen2 (all parameters trainable, or LoRA
// on all seven projections), with the plan's lean_recompute (LF_LEAN_RECOMPUTE) as given.
Run run(const char* lean, bool lora) {
  config::KernelPaths paths;
  paths.lean_recompute = std::string(lean) == "1";
  const ScopedKernelPaths knob(paths);
  auto model = load_causal_lm(fixture("qwen2_tiny").string(), LoadOptions{});
  model->set_gradient_checkpointing(true);
  std::vector<at::Tensor> params;
  if (lora) {
    load_lora_adapter(*model, fixture("qwen2_lora_init"));
    for (auto& p : lora_parameters(*model)) params.push_back(*p.tensor);
  } else {
    for (auto& p : model->named_parameters()) {
      p.tensor->set_requires_grad(true);
      params.push_back(*p.tensor);
    }
  }
  const auto ref = load_ref("qwen2_ref.safetensors");
  auto loss = causal_lm_loss(model->forward(ref.at("input_ids")), ref.at("labels"));
  Run r;
  {
    LinearCounter counter;
    loss.backward();
    r.backward_linears = counter.count();
  }
  for (auto& p : params) r.grads.push_back(p.grad().clone());
  return r;
}

void check(bool lora) {
  const auto full = run("0", lora);
  const auto lean = run("1", lora);
  const int64_t layers = load_causal_lm(fixture("qwen2_tiny").string(), LoadOptions{})->num_layers();
  // Without LoRA each projection is one aten::linear; LoRA adds its A (and, off the fused
  // path, its B) GEMMs, which both recomputes run.
  const int64_t per_layer = lora ? 7 * 3 : 7;
  EXPECT_EQ(full.backward_linears, layers * per_layer) << "the full recompute runs every projection";
  EXPECT_EQ(lean.backward_linears, layers * (per_layer - 2)) << "the lean one skips o_proj's and down_proj's GEMMs";
  ASSERT_EQ(full.grads.size(), lean.grads.size());
  for (size_t i = 0; i < full.grads.size(); ++i) EXPECT_LE(rel_err(lean.grads[i], full.grads[i]), 1e-6) << i;
}

TEST(LeanRecompute, SkipsTwoProjectionsWithTheSameGradients) { check(false); }
TEST(LeanRecompute, LoraOverAFrozenBaseTheSame) { check(true); }

TEST(LeanRecompute, BackwardOnlyLinearHasLinearsGradients) {
  at::manual_seed(2);
  const auto x = at::randn({2, 3, 5}, at::kDouble).requires_grad_(true);
  const auto w = at::randn({4, 5}, at::kDouble).requires_grad_(true);
  const auto b = at::randn({4}, at::kDouble).requires_grad_(true);
  const auto g = at::randn({2, 3, 4}, at::kDouble);
  at::linear(x, w, b).backward(g);
  const auto dx = x.grad().clone(), dw = w.grad().clone(), db = b.grad().clone();
  x.mutable_grad().reset(), w.mutable_grad().reset(), b.mutable_grad().reset();
  const auto y = backward_only_linear(x, w, b);
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 3, 4}));
  y.backward(g);
  EXPECT_TRUE(at::allclose(x.grad(), dx, 1e-12, 1e-12));
  EXPECT_TRUE(at::allclose(w.grad(), dw, 1e-12, 1e-12));
  EXPECT_TRUE(at::allclose(b.grad(), db, 1e-12, 1e-12));
  // Frozen weight and no bias (LoRA's base): only dx.
  const auto w0 = w.detach();
  x.mutable_grad().reset();
  backward_only_linear(x, w0, at::Tensor()).backward(g);
  EXPECT_TRUE(at::allclose(x.grad(), at::linear(g, w0.t()), 1e-12, 1e-12));
}

}  // namespace
}  // namespace lf::model
