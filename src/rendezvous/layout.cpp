#include "lf/rendezvous/layout.h"

#include <fmt/format.h>

namespace lf::rdzv {

std::optional<std::vector<std::pair<uint64_t, int64_t>>> assign_node_ranks(const std::vector<NodeRequest>& requests,
                                                                           std::string* error) {
  const int64_t n = static_cast<int64_t>(requests.size());
  std::vector<bool> taken(n, false);
  for (const auto& r : requests) {
    if (r.requested_rank < 0) continue;
    if (r.requested_rank >= n) {
      *error = fmt::format("node rank {} requested, but the job has {} nodes (ranks 0..{})", r.requested_rank, n, n - 1);
      return std::nullopt;
    }
    if (taken[r.requested_rank]) {
      *error = fmt::format("node rank {} requested by two nodes", r.requested_rank);
      return std::nullopt;
    }
    taken[r.requested_rank] = true;
  }
  std::vector<std::pair<uint64_t, int64_t>> out;
  int64_t next_free = 0;
  for (const auto& r : requests) {
    int64_t rank = r.requested_rank;
    if (rank < 0) {
      while (taken[next_free]) ++next_free;
      rank = next_free;
      taken[rank] = true;
    }
    out.emplace_back(r.id, rank);
  }
  return out;
}

}  // namespace lf::rdzv
