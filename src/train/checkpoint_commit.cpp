#include "checkpoint_commit.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "lf/common/error.h"
#include "lf/common/hash.h"
#include "lf/common/remove_tree.h"
#include "lf/common/xxhash64.h"

namespace lf::train {
namespace fs = std::filesystem;

namespace {

void fsync_path(const fs::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  LF_CHECK(fd >= 0, ConfigError, "cannot open {} to sync it: {}", p.string(), std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  LF_CHECK(rc == 0, ConfigError, "fsync {} failed: {} (is the disk full?)", p.string(), std::strerror(err));
}

}  // namespace

void seal_checkpoint_folder(const fs::path& dir) {
  nlohmann::ordered_json files = nlohmann::ordered_json::object();
  std::set<std::string> names;  // sorted: the manifest reads the same for the same folder
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename() != kManifestFile) names.insert(e.path().filename().string());
  for (const auto& name : names) {
    const auto path = dir / name;
    fsync_path(path);
    files[name] = {{"bytes", fs::file_size(path)}, {"xxh64", hex64(xxh64_file(path.string()))}};
  }
  const auto manifest = dir / kManifestFile;
  {
    std::ofstream out(manifest);
    out << nlohmann::ordered_json{{"format", 1}, {"files", files}}.dump(2) << "\n";
    LF_CHECK(out.good(), ConfigError, "cannot write {} (is the disk full?)", manifest.string());
  }
  fsync_path(manifest);
  fsync_path(dir);
}

void commit_checkpoint_folder(const fs::path& tmp, const fs::path& final_dir) {
  lf::remove_tree(final_dir);
  fs::rename(tmp, final_dir);
  fsync_path(final_dir.parent_path());
}

std::string checkpoint_damage(const fs::path& dir, CheckDepth depth) {
  const auto manifest = dir / kManifestFile;
  if (!fs::exists(manifest)) return kNoManifest;
  std::ifstream in(manifest);
  const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("files") || !j["files"].is_object()) return "its manifest is not readable";
  for (const auto& [name, entry] : j["files"].items()) {
    const auto path = dir / name;
    std::error_code ec;
    const auto bytes = fs::file_size(path, ec);
    if (ec) return fmt::format("{} is missing", name);
    const auto want = entry.value("bytes", uint64_t{0});
    if (bytes != want) return fmt::format("{} has {} bytes, the manifest says {}", name, bytes, want);
    if (depth == CheckDepth::kChecksums && hex64(xxh64_file(path.string())) != entry.value("xxh64", std::string()))
      return fmt::format("{} does not match its checksum", name);
  }
  return "";
}

}  // namespace lf::train
