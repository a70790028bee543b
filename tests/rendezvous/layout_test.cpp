#include <gtest/gtest.h>

#include "lf/rendezvous/layout.h"

using namespace lf::rdzv;

TEST(Layout, KeepsRequestedRanksAndFillsTheRestInArrivalOrder) {
  std::string err;
  auto r = assign_node_ranks({{10, -1, 2}, {11, 0, 2}, {12, -1, 2}, {13, 2, 2}}, &err);
  ASSERT_TRUE(r) << err;
  std::vector<std::pair<uint64_t, int64_t>> want{{10, 1}, {11, 0}, {12, 3}, {13, 2}};
  EXPECT_EQ(*r, want);
}

TEST(Layout, RejectsDuplicateAndOutOfRange) {
  std::string err;
  EXPECT_FALSE(assign_node_ranks({{1, 0, 1}, {2, 0, 1}}, &err));
  EXPECT_NE(err.find("requested by two nodes"), std::string::npos);
  EXPECT_FALSE(assign_node_ranks({{1, 0, 1}, {2, 5, 1}}, &err));
  EXPECT_NE(err.find("job has 2 nodes"), std::string::npos);
}
