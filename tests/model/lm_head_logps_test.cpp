// model::chunked_lm_head_logps (the preference losses' per-token log-probabilities) against log_softmax over
// the full [M, V] logits: values, and the gradients of rows and weight under a different upstream gradient
// per row (what a pair's loss gives its tokens), whatever the chunk.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include "lf/model/lm_head_logps.h"

namespace {

TEST(LmHeadLogps, MatchesLogSoftmaxAndItsGradients) {
  at::manual_seed(3);
  const int64_t m = 37, c = 16, v = 50;
  const auto h0 = at::randn({m, c}, at::kDouble), w0 = at::randn({v, c}, at::kDouble) * 0.3;
  const auto y = at::randint(0, v, {m}, at::kLong);
  const auto g = at::randn({m}, at::kDouble);  // a different upstream gradient per row
  auto h_ref = h0.clone().set_requires_grad(true), w_ref = w0.clone().set_requires_grad(true);
  const auto want = at::log_softmax(at::matmul(h_ref, w_ref.t()), -1).gather(1, y.unsqueeze(1)).squeeze(1);
  torch::autograd::backward({want}, {g});
  for (int64_t chunk : {1, 5, 37, 100}) {
    auto h = h0.clone().set_requires_grad(true), w = w0.clone().set_requires_grad(true);
    const auto got = lf::model::chunked_lm_head_logps(h, w, y, chunk);
    EXPECT_EQ(got.scalar_type(), at::kFloat);
    EXPECT_TRUE(at::allclose(got.to(at::kDouble), want.detach(), 1e-6, 1e-6)) << "chunk " << chunk;
    torch::autograd::backward({got}, {g.to(at::kFloat)});
    EXPECT_TRUE(at::allclose(h.grad(), h_ref.grad(), 1e-6, 1e-6)) << "rows' gradient, chunk " << chunk;
    EXPECT_TRUE(at::allclose(w.grad(), w_ref.grad(), 1e-6, 1e-6)) << "weight's gradient, chunk " << chunk;
  }
}

// LoRA's frozen lm_head: the rows' gradients made in the forward, scaled in backward, equal log_softmax's.
TEST(LmHeadLogps, FrozenWeightRowsGradientsAreLogSoftmaxs) {
  at::manual_seed(5);
  const auto h0 = at::randn({9, 8}, at::kDouble), w = at::randn({10, 8}, at::kDouble);
  const auto y = at::randint(0, 10, {9}, at::kLong);
  const auto g = at::randn({9}, at::kDouble);
  auto h_ref = h0.clone().set_requires_grad(true);
  torch::autograd::backward({at::log_softmax(at::matmul(h_ref, w.t()), -1).gather(1, y.unsqueeze(1)).squeeze(1)}, {g});
  auto h = h0.clone().set_requires_grad(true);
  const auto lp = lf::model::chunked_lm_head_logps(h, w, y, 4);
  torch::autograd::backward({lp}, {g.to(at::kFloat)});
  EXPECT_TRUE(at::allclose(h.grad(), h_ref.grad(), 1e-6, 1e-6));
  EXPECT_FALSE(w.grad().defined());
}

}  // namespace
