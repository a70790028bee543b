#pragma once
// A folder of this node's agent for the files its workers share during the job: today the tokenized
// dataset, which one worker writes and the others load. Unique per agent (mkdtemp under TMPDIR), so no
// job loads another's leftovers, and removed when the agent exits, whether the job succeeded, failed or
// was interrupted (SIGINT, SIGTERM, SIGHUP): the workers cannot clean up after a failure that killed
// them. Only SIGKILL of the agent itself leaves it behind.
#include <filesystem>

namespace lf::agent {

class NodeScratch {
 public:
  NodeScratch() = default;
  ~NodeScratch();
  NodeScratch(const NodeScratch&) = delete;
  NodeScratch& operator=(const NodeScratch&) = delete;

  // Made on the first call and the same afterwards: an elastic round's workers find what the round
  // before them tokenized. Empty when it cannot be made under TMPDIR (logged); the workers then fall
  // back to a folder of their own naming there.
  const std::filesystem::path& path();

 private:
  std::filesystem::path path_;
  bool tried_ = false;
};

}  // namespace lf::agent
