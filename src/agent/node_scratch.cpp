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
  std::error_code ec;
  const fs::path tmp = fs::temp_directory_path(ec);
  std::string pattern = ((ec ? fs::path("/tmp") : tmp) / fmt::format("lf-train-{}-node-XXXXXX", ::getuid())).string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    spdlog::warn("could not create the node's scratch folder {}: {}; the workers name one themselves (set TMPDIR "
                 "to a writable folder so that it is removed with the job)", pattern, std::strerror(errno));
    return path_;
  }
  path_ = pattern;
  return path_;
}

NodeScratch::~NodeScratch() {
  if (!path_.empty()) remove_tree(path_);
}

}  // namespace lf::agent
