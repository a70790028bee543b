#include "lf/agent/node_scratch.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "lf/common/remove_tree.h"

namespace lf::agent {

namespace fs = std::filesystem;

const fs::path& NodeScratch::path() {
  if (tried_) return path_;
  tried_ = true;
  // The workers' own fallback is under the same TMPDIR (and fails the same way): no other place is tried.
  std::error_code ec;
  const fs::path tmp = fs::absolute(fs::temp_directory_path(ec), ec);
  std::string pattern = (tmp / fmt::format("lf-train-{}-node-XXXXXX", ::getuid())).string();
  if (ec || ::mkdtemp(pattern.data()) == nullptr) {
    spdlog::warn("could not create the node's scratch folder {}: {}; workers that share the tokenized dataset "
                 "will fail to as well: set TMPDIR to a writable folder, or tokenized_path",
                 pattern, ec ? ec.message() : std::strerror(errno));
    return path_;
  }
  path_ = pattern;
  return path_;
}

NodeScratch::~NodeScratch() {
  if (!path_.empty()) remove_tree(path_);
}

}  // namespace lf::agent
