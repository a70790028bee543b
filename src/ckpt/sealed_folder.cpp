#include "lf/ckpt/sealed_folder.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <map>
#include <set>

#include "lf/common/error.h"
#include "lf/common/hash.h"
#include "lf/common/remove_tree.h"
#include "lf/common/xxhash64.h"

namespace lf::ckpt {
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

std::vector<FileRecord> make_durable(const fs::path& dir, const std::vector<std::string>& names, int64_t rank) {
  std::vector<FileRecord> out;
  for (const auto& name : names) {
    const auto path = dir / name;
    fsync_path(path);
    out.push_back({name, fs::file_size(path), hex64(xxh64_file(path.string())), rank});
  }
  return out;
}

void write_manifest(const fs::path& dir, const std::vector<FileRecord>& records) {
  // Sorted by name: the manifest reads the same for the same folder.
  std::map<std::string, const FileRecord*> sorted;
  for (const auto& r : records) {
    LF_CHECK(sorted.emplace(r.name, &r).second, ConfigError,
             "checkpoint {}: file {} reported by two ranks ({} and {})", dir.string(), r.name, sorted[r.name]->rank,
             r.rank);
  }
  nlohmann::ordered_json files = nlohmann::ordered_json::object();
  const bool one_writer = std::all_of(records.begin(), records.end(), [](const auto& r) { return r.rank == 0; });
  for (const auto& [name, r] : sorted) {
    files[name] = {{"bytes", r->bytes}, {"xxh64", r->xxh64}};
    if (!one_writer) files[name]["rank"] = r->rank;
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

void seal_checkpoint_folder(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename() != kManifestFile) names.insert(e.path().filename().string());
  write_manifest(dir, make_durable(dir, {names.begin(), names.end()}, 0));
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
    const auto who = entry.contains("rank") ? fmt::format(" (written by rank {})", entry["rank"].get<int64_t>()) : "";
    std::error_code ec;
    const auto bytes = fs::file_size(path, ec);
    if (ec) return fmt::format("{}{} is missing", name, who);
    const auto want = entry.value("bytes", uint64_t{0});
    if (bytes != want) return fmt::format("{}{} has {} bytes, the manifest says {}", name, who, bytes, want);
    if (depth == CheckDepth::kChecksums && hex64(xxh64_file(path.string())) != entry.value("xxh64", std::string()))
      return fmt::format("{}{} does not match its checksum", name, who);
  }
  return "";
}

int remove_stale_temporaries(const fs::path& output_dir) {
  if (!fs::is_directory(output_dir)) return 0;
  int removed = 0;
  for (const auto& e : fs::directory_iterator(output_dir)) {
    const auto name = e.path().filename().string();
    if (e.is_directory() && name.rfind(".checkpoint-", 0) == 0 && e.path().extension() == ".tmp") {
      lf::remove_tree(e.path());
      ++removed;
    }
  }
  return removed;
}

}  // namespace lf::ckpt
