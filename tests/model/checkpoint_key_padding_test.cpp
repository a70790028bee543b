// A checkpointed layer's recompute under a KeyPaddingScope (key_padding.h, checkpointing.cpp): the recompute
// masks the padding keys as its forward did, also when the backward runs on another thread than the forward's
// (a GPU's autograd engine runs it on its device thread, where the step's scope is not open). Here the
// backward runs on a std::thread, which the CPU's engine then runs it on; upstream gradients on the pad
// positions too, so that a recompute without the mask (pad queries attending to pad keys) changes them.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "lf/model/key_padding.h"
#include "lf/model/loader.h"
#include "model_test_util.h"

namespace lf::model {
namespace {
using test::fixture;
using test::load_ref;
using test::rel_err;

std::vector<at::Tensor> grads_with_padding(bool checkpointing) {
  auto model = load_causal_lm(fixture("qwen2_tiny").string(), LoadOptions{});
  model->set_gradient_checkpointing(checkpointing);
  std::vector<at::Tensor> params;
  for (auto& p : model->named_parameters()) {
    p.tensor->set_requires_grad(true);
    params.push_back(*p.tensor);
  }
  const auto ids = load_ref("qwen2_ref.safetensors").at("input_ids");  // [B, T]
  const int64_t b = ids.size(0), t = ids.size(1);
  const auto lengths = at::full({b}, t - 3, at::kLong);  // every row's last 3 positions are padding
  at::Tensor logits;
  {
    const KeyPaddingScope pads(lengths);
    logits = model->forward(ids);
  }
  at::manual_seed(5);
  const auto upstream = at::randn(logits.sizes(), logits.options());
  std::thread([&] { logits.backward(upstream); }).join();  // outside the scope, on another thread
  for (auto& p : params) p = p.grad().clone();
  return params;
}

TEST(CheckpointKeyPadding, RecomputeOnAnotherThreadKeepsTheMask) {
  const auto plain = grads_with_padding(false);
  const auto checkpointed = grads_with_padding(true);
  ASSERT_EQ(plain.size(), checkpointed.size());
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_LE(rel_err(checkpointed[i], plain[i]), 1e-6) << "parameter " << i;
}

}  // namespace
}  // namespace lf::model
