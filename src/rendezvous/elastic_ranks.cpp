#include "lf/rendezvous/elastic_ranks.h"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace lf::rdzv {

std::vector<std::pair<uint64_t, int64_t>> assign_dense_node_ranks(const std::vector<NodeRequest>& requests,
                                                                  const std::vector<bool>& stays) {
  const size_t n = requests.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  // (no rank asked last, then the number, then a node that stays first, then request order)
  auto key = [&](size_t i) {
    const int64_t r = requests[i].requested_rank;
    return std::make_tuple(r < 0, r, !(i < stays.size() && stays[i]), i);
  };
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  std::vector<std::pair<uint64_t, int64_t>> out(n);
  for (size_t rank = 0; rank < n; ++rank) out[order[rank]] = {requests[order[rank]].id, static_cast<int64_t>(rank)};
  return out;
}

}  // namespace lf::rdzv
