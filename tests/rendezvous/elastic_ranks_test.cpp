#include <gtest/gtest.h>

#include "lf/rendezvous/elastic_ranks.h"

using namespace lf::rdzv;
using Ranks = std::vector<std::pair<uint64_t, int64_t>>;

TEST(ElasticRanks, ALostNodeLeavesNoGap) {
  // Nodes 0, 1, 2 ran; node 1 was lost: node 2 becomes node 1 (layout.h's rule refused rank 2 of 2).
  EXPECT_EQ(assign_dense_node_ranks({{10, 0, 1}, {12, 2, 1}}, {true, true}), (Ranks{{10, 0}, {12, 1}}));
  std::string err;
  EXPECT_FALSE(assign_node_ranks({{10, 0, 1}, {12, 2, 1}}, &err));
}

TEST(ElasticRanks, AReturningNodeAskingForATakenNumberComesAfterTheNodeThatStays) {
  // After the renumbering above, node 1 comes back with NODE_RANK=1: the node that stays keeps 1.
  EXPECT_EQ(assign_dense_node_ranks({{10, 0, 1}, {12, 1, 1}, {11, 1, 1}}, {true, true, false}),
            (Ranks{{10, 0}, {12, 1}, {11, 2}}));
  // The same request order with the newcomer first: the one that stays still wins the number.
  EXPECT_EQ(assign_dense_node_ranks({{11, 1, 1}, {10, 0, 1}, {12, 1, 1}}, {false, true, true}),
            (Ranks{{11, 2}, {10, 0}, {12, 1}}));
}

TEST(ElasticRanks, NodesWithoutARankFollowInArrivalOrder) {
  EXPECT_EQ(assign_dense_node_ranks({{20, -1, 1}, {21, 5, 1}, {22, -1, 1}, {23, 0, 1}}, {false, false, false, false}),
            (Ranks{{20, 2}, {21, 1}, {22, 3}, {23, 0}}));
  EXPECT_TRUE(assign_dense_node_ranks({}, {}).empty());
}
