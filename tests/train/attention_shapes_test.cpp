// train/attention_shapes.h: which runs meet a new attention shape at most forwards, and what LF_SDPA_BACKEND's
// auto then lets SDPA pick (cuDNN's attention left out; torch keeps it).
#include <ATen/Context.h>
#include <gtest/gtest.h>

#include "attention_shapes.h"
#include "lf/model/sdpa.h"

namespace lf::train {
namespace {

TEST(AttentionShapes, LengthsVaryForUnpackedRowsPaddedFinerThanABucket) {
  config::JobPlan c;
  c.objective.stage = "sft";
  c.data.packing = false;
  EXPECT_TRUE(attention_lengths_vary(c, 8));     // the collator's multiple of 8: a shape per batch length
  EXPECT_FALSE(attention_lengths_vary(c, 128));  // CUDA graphs' bucket: 16 shapes up to 2048 tokens
  c.data.packing = true;
  EXPECT_FALSE(attention_lengths_vary(c, 8));  // every row cutoff_len long
  c.objective.stage = "dpo";                     // pairs are never packed
  EXPECT_TRUE(attention_lengths_vary(c, 8));
}

TEST(AttentionShapes, AutoLeavesCudnnOutOnlyWhereLengthsVary) {
  auto& ctx = at::globalContext();
  model::use_sdpa_backend("auto", /*lengths_vary=*/true);
  EXPECT_FALSE(ctx.userEnabledCuDNNSDP());
  EXPECT_TRUE(ctx.userEnabledFlashSDP() && ctx.userEnabledMemEfficientSDP() && ctx.userEnabledMathSDP());
  model::use_sdpa_backend("auto", /*lengths_vary=*/false);
  EXPECT_TRUE(ctx.userEnabledCuDNNSDP() && ctx.userEnabledFlashSDP());
  model::use_sdpa_backend("torch", /*lengths_vary=*/true);  // torch's own order, whatever the rows
  EXPECT_TRUE(ctx.userEnabledCuDNNSDP() && ctx.userEnabledFlashSDP());
  model::use_sdpa_backend("cudnn", /*lengths_vary=*/true);  // asked for: kept
  EXPECT_TRUE(ctx.userEnabledCuDNNSDP());
  EXPECT_FALSE(ctx.userEnabledFlashSDP());
  model::use_sdpa_backend("auto");
  EXPECT_TRUE(ctx.userEnabledCuDNNSDP());
}

}  // namespace
}  // namespace lf::train
