// model::chunked_lm_head_asft (LLaMA-Factory's ASFT loss per target token) against the loss written out over the
// full [M, V] logits with autograd: p(y) ce (the weight detached) + alpha KL(q || p), values and the gradients of
// rows and weight under a different upstream gradient per row, whatever the chunk.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include "lf/model/lm_head_asft.h"

namespace {

// The per-row loss as asft_loss_func computes it (F.cross_entropy, exp(-ce) detached, F.kl_div(...).sum(-1)).
at::Tensor asft_rows(const at::Tensor& h, const at::Tensor& w, const at::Tensor& y, const at::Tensor& rh,
                     const at::Tensor& rw, double alpha) {
  const auto logp = at::log_softmax(at::matmul(h, w.t()), -1);
  const auto ce = -logp.gather(1, y.unsqueeze(1)).squeeze(1);
  const auto q = at::softmax(at::matmul(rh, rw.t()), -1);
  const auto kl = (at::xlogy(q, q) - q * logp).sum(-1);
  return ce * at::exp(-ce).detach() + alpha * kl;
}

TEST(LmHeadAsft, MatchesTheWrittenOutLossAndItsGradients) {
  at::manual_seed(7);
  const int64_t m = 23, c = 12, v = 40;
  const double alpha = 0.3;
  const auto h0 = at::randn({m, c}, at::kDouble), w0 = at::randn({v, c}, at::kDouble) * 0.3;
  const auto rh = at::randn({m, c}, at::kDouble), rw = at::randn({v, c}, at::kDouble) * 0.3;
  const auto y = at::randint(0, v, {m}, at::kLong);
  const auto g = at::randn({m}, at::kDouble);
  auto h_ref = h0.clone().set_requires_grad(true), w_ref = w0.clone().set_requires_grad(true);
  const auto want = asft_rows(h_ref, w_ref, y, rh, rw, alpha);
  torch::autograd::backward({want}, {g});
  for (int64_t chunk : {1, 4, 23, 64}) {
    auto h = h0.clone().set_requires_grad(true), w = w0.clone().set_requires_grad(true);
    const auto got = lf::model::chunked_lm_head_asft(h, w, y, rh, rw, alpha, chunk);
    EXPECT_EQ(got.scalar_type(), at::kFloat);
    EXPECT_TRUE(at::allclose(got.to(at::kDouble), want.detach(), 1e-6, 1e-6)) << "chunk " << chunk;
    torch::autograd::backward({got}, {g.to(at::kFloat)});
    EXPECT_TRUE(at::allclose(h.grad(), h_ref.grad(), 1e-6, 1e-6)) << "rows' gradient, chunk " << chunk;
    EXPECT_TRUE(at::allclose(w.grad(), w_ref.grad(), 1e-6, 1e-6)) << "weight's gradient, chunk " << chunk;
  }
}

// At the start the reference is the model itself: the KL term is 0 and the loss is DFT's, p(y) ce.
TEST(LmHeadAsft, TheInitialModelsKlIsZero) {
  at::manual_seed(11);
  const auto h = at::randn({6, 8}), w = at::randn({20, 8});
  const auto y = at::randint(0, 20, {6}, at::kLong);
  const auto logp = at::log_softmax(at::matmul(h, w.t()), -1).gather(1, y.unsqueeze(1)).squeeze(1);
  const auto got = lf::model::chunked_lm_head_asft(h, w, y, h, w, 5.0, 4);
  EXPECT_TRUE(at::allclose(got, -logp.exp() * logp, 1e-5, 1e-6));
}

}  // namespace
