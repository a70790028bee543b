#pragma once
// Node-rank assignment when a rendezvous round closes: pure, so tested alone.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lf::rdzv {

struct NodeRequest {
  uint64_t id = 0;              // the caller's handle for this node
  int64_t requested_rank = -1;  // -1: any
  int64_t nproc = 1;
};

// Node ranks 0..n-1 for n requests: requested ranks are kept, the others fill
// the free ranks in request order. Returns (id, rank) pairs in request order,
// or nullopt with *error naming the conflict (duplicate or out-of-range rank).
std::optional<std::vector<std::pair<uint64_t, int64_t>>> assign_node_ranks(const std::vector<NodeRequest>& requests,
                                                                           std::string* error);

}  // namespace lf::rdzv
