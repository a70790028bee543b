// neat_packing's sequence offsets for the GPU's varlen attention (varlen_attention.h): every run
// of one segment id within a row is a sequence, padding runs included, rows never merge.
// The kernel itself runs only on a GPU: tests/kernels/varlen_attention_test.cpp.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "lf/model/varlen_attention.h"

namespace lf::model {
namespace {

std::vector<int32_t> offsets(const VarlenSegments& s) {
  const auto c = s.cu_seqlens.to(at::kCPU).contiguous();
  return {c.data_ptr<int32_t>(), c.data_ptr<int32_t>() + c.numel()};
}

TEST(VarlenSegments, EachRunOfARowIsOneSequence) {
  // Row 0: sequences 1 (3 tokens), 2 (4), padding (2). Row 1: 1 (6), 2 (3), no padding.
  const auto ids = at::tensor(std::vector<int64_t>{1, 1, 1, 2, 2, 2, 2, 0, 0, 1, 1, 1, 1, 1, 1, 2, 2, 2}).view({2, 9});
  const auto s = varlen_segments(ids, at::kCPU);
  EXPECT_EQ(s.cu_seqlens.scalar_type(), at::kInt);
  EXPECT_EQ(offsets(s), (std::vector<int32_t>{0, 3, 7, 9, 15, 18}));
  EXPECT_EQ(s.max_seqlen, 6);
}

TEST(VarlenSegments, EqualIdsInTwoRowsStaySeparate) {
  // The same id ending row 0 and starting row 1, and a row of one sequence.
  const auto ids = at::tensor(std::vector<int64_t>{1, 1, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1}).view({3, 4});
  const auto s = varlen_segments(ids.to(at::kInt), at::kCPU);
  EXPECT_EQ(offsets(s), (std::vector<int32_t>{0, 2, 4, 6, 8, 12}));
  EXPECT_EQ(s.max_seqlen, 4);
}

TEST(VarlenSegments, NotOnAGpuTheMaskIsUsed) {
  EXPECT_FALSE(varlen_attention_supported(at::kCPU, at::kBFloat16, 64));
  EXPECT_FALSE(varlen_attention_supported(at::Device(at::kCUDA, 0), at::kFloat, 64));  // fp32: no flash
  EXPECT_FALSE(varlen_attention_supported(at::Device(at::kCUDA, 0), at::kBFloat16, 60));  // not a multiple of 8
}

TEST(VarlenSegments, BadShapeIsAnError) {
  EXPECT_THROW(varlen_segments(at::zeros({8}, at::kLong), at::kCPU), std::exception);
}

}  // namespace
}  // namespace lf::model
