#include "lf/comm/rank_agreement.h"

#include <fmt/format.h>

#include <vector>

#include "lf/common/error.h"
#include "lf/rendezvous/store_client.h"

namespace lf::comm {

void require_same_on_every_rank(rdzv::StoreClient& store, const std::string& key_prefix, int rank, int world_size,
                                const std::string& what, const std::string& value, std::chrono::milliseconds timeout,
                                const std::string& hint) {
  const auto key = [&](int r) { return fmt::format("{}/agree/{}/{}", key_prefix, what, r); };
  store.set(key(rank), value);
  std::vector<std::string> keys;
  for (int r = 0; r < world_size; ++r) keys.push_back(key(r));
  store.wait(keys, timeout);
  // Every rank reports the first rank that differs from rank 0, so all of them fail alike.
  const std::string reference = *store.get(key(0));
  for (int r = 1; r < world_size; ++r) {
    const std::string theirs = *store.get(key(r));
    LF_CHECK(theirs == reference, BackendError,
             "{} differs between ranks: rank {} has {}, rank 0 has {} (this is rank {}); every node must run with "
             "the same {}{}",
             what, r, theirs, reference, rank, what, hint.empty() ? "" : " (" + hint + ")");
  }
}

}  // namespace lf::comm
