#pragma once
// Node ranks of an elastic job (--nnodes MIN:MAX): dense, 0..n-1 for the n nodes of the
// round, whatever ranks they had or asked for. A node lost between two rounds leaves no gap:
// the nodes after it move down, in their old order (torchrun's c10d rendezvous renumbers
// every round too). Pure, so tested alone; layout.h keeps the fixed-size job's rule (a
// requested rank is a claim there).
#include <cstdint>
#include <utility>
#include <vector>

#include "lf/rendezvous/layout.h"

namespace lf::rdzv {

// requested_rank is the node's rank in the last round (a node that stays), or the rank it
// asked for (NODE_RANK of a node that joins now), or -1. Ranks follow that order, a node
// that stays before a newcomer asking for the same number, the rest (-1) in request order.
// Node 0 stays node 0 while it is there (it hosts the server). Returns (id, rank) pairs in
// request order.
std::vector<std::pair<uint64_t, int64_t>> assign_dense_node_ranks(const std::vector<NodeRequest>& requests,
                                                                  const std::vector<bool>& stays);

}  // namespace lf::rdzv
