// OFT's pieces (model/oft.h) against their definitions in peft 0.18.1's oft/layer.py; the end-to-end numerics are
// LLaMA-Factory's own runs (tests/train/test_lf_oft.py).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include "lf/common/error.h"
#include "lf/model/oft.h"

namespace lf::model {
namespace {

OftWeights random_weights(int64_t in, int64_t block, double scale, bool neumann = true) {
  OftConfig c;
  c.block_size = block;
  c.use_cayley_neumann = neumann;
  auto w = make_oft_weights(c, in, at::kCPU);
  auto gen = at::detail::createCPUGenerator(5);
  w.weight_ = (at::randn(w.weight_.sizes(), gen) * scale).set_requires_grad(true);
  return w;
}

}  // namespace

// peft's OFTLayer.update_layer: a block size (or rank) that does not divide in_features moves to the nearest
// divisor, the lower one on a tie; one larger than in_features becomes in_features.
TEST(Oft, BlockSizeIsPeftsAdjustedDivisor) {
  EXPECT_EQ(oft_block_size_for(0, 32, 128), 32);
  EXPECT_EQ(oft_block_size_for(0, 20, 128), 16);   // 16 and 32: 4 below, 12 above
  EXPECT_EQ(oft_block_size_for(0, 20, 384), 16);   // 16 and 24: a tie, the lower
  EXPECT_EQ(oft_block_size_for(0, 200, 128), 128);
  EXPECT_EQ(oft_block_size_for(4, 0, 64), 16);     // oft_rank 4: blocks of in / 4
  EXPECT_EQ(oft_block_size_for(3, 0, 128), 64);    // rank 3 -> 2 (tie with 4, the lower)
  EXPECT_EQ(oft_params(0, 8, 32), 4 * 28);
}

TEST(Oft, RankAndBlockSizeAreExclusive) {
  EXPECT_THROW(check_oft_config({.rank = 4, .block_size = 32}), ConfigError);
  EXPECT_THROW(check_oft_config({.rank = 0, .block_size = 0}), ConfigError);
  EXPECT_NO_THROW(check_oft_config({.rank = 4, .block_size = 0}));
}

// Zero weights rotate nothing; each block's rotation is I + 2Q + 2Q² + 2Q³ + Q⁴ with Q skew-symmetric, its upper
// triangle the weight's entries row by row (torch.triu_indices(b, b, 1)).
TEST(Oft, RotationIsPeftsCayleyNeumannSeries) {
  OftConfig c;
  c.block_size = 4;
  const auto zero = make_oft_weights(c, 8, at::kCPU);
  EXPECT_TRUE(at::equal(oft_rotations(zero), at::eye(4).repeat({2, 1, 1})));
  const auto w = random_weights(8, 4, 0.1);
  const auto v = w.weight_.detach();  // [2, 6]
  for (int64_t blk = 0; blk < 2; ++blk) {
    auto q = at::zeros({4, 4});
    int64_t e = 0;
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = i + 1; j < 4; ++j, ++e) q[i][j] = v[blk][e], q[j][i] = -v[blk][e];
    const auto q2 = q.mm(q), q3 = q2.mm(q), q4 = q3.mm(q);
    const auto want = at::eye(4) + 2 * q + 2 * q2 + 2 * q3 + q4;
    EXPECT_TRUE(at::allclose(oft_rotations(w)[blk], want, 1e-6, 1e-7)) << blk;
  }
  // The exact Cayley transform (use_cayley_neumann false) is orthogonal.
  const auto exact = oft_rotations(random_weights(8, 4, 0.5, false));
  EXPECT_TRUE(at::allclose(exact.bmm(exact.transpose(1, 2)), at::eye(4).repeat({2, 1, 1}), 1e-5, 1e-5));
}

// The rotated input through W equals the input through the merged weight W R_bdᵀ (peft's merge), and the
// rotation's gradient reaches oft_R.weight.
TEST(Oft, MergedWeightIsTheRotatedLayer) {
  const auto w = random_weights(16, 4, 0.2);
  auto gen = at::detail::createCPUGenerator(6);
  const auto weight = at::randn({6, 16}, gen), x = at::randn({3, 5, 16}, gen);
  const auto y = at::linear(oft_rotate(x, w), weight);
  const auto merged = oft_merged_weight(weight, w);
  EXPECT_TRUE(at::allclose(y, at::linear(x, merged), 1e-5, 1e-5));
  y.sum().backward();
  ASSERT_TRUE(w.weight_.grad().defined());
  EXPECT_GT(w.weight_.grad().abs().max().item<double>(), 0);
}

}  // namespace lf::model
