#include "retry_resume.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "lf/common/output_lock.h"

namespace lf {

namespace fs = std::filesystem;

namespace {

// checkpoint-N -> N; -1 for anything else (".checkpoint-N.tmp", "checkpoint-final").
int64_t checkpoint_step(const std::string& name) {
  if (name.rfind("checkpoint-", 0) != 0 || name.size() == 11) return -1;
  for (size_t i = 11; i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9') return -1;
  try {
    return std::stoll(name.substr(11));
  } catch (const std::exception&) {
    return -1;
  }
}

// Device, inode and mtime of the checkpoint's state file: a checkpoint committed again (the
// rename replaces the folder) has a new one even at the same step.
std::string identity(const fs::path& dir) {
  struct stat st {};
  if (::stat((dir / "lf_trainer_state.json").c_str(), &st) != 0) return "";
  return fmt::format("{}:{}:{}.{}", st.st_dev, st.st_ino, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

}  // namespace

std::string sealed_checkpoint_problem(const fs::path& dir) {
  if (!fs::exists(dir / "lf_trainer_state.json")) return "no lf_trainer_state.json";
  std::ifstream in(dir / "lf_manifest.json");
  if (!in) return "no lf_manifest.json";
  const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("files") || !j["files"].is_object()) return "lf_manifest.json is not readable";
  for (const auto& [name, entry] : j["files"].items()) {
    std::error_code ec;
    const auto bytes = fs::file_size(dir / name, ec);
    if (ec) return name + " is missing";
    if (!entry.is_object() || bytes != entry.value("bytes", uint64_t{0}))
      return fmt::format("{} has {} bytes, the manifest says another size", name, bytes);
  }
  return "";
}

RetryResume::RetryResume(fs::path output_dir) : out_(std::move(output_dir)) {
  std::error_code ec;
  if (!fs::is_directory(out_, ec)) return;
  for (const auto& e : fs::directory_iterator(out_, ec)) {
    // The job's own lock (output_lock.h) is no content.
    if (e.path().filename().string().rfind(OutputLock::kFileName, 0) == 0) continue;
    started_empty_ = false;
    if (e.is_directory() && checkpoint_step(e.path().filename().string()) >= 0)
      before_[e.path().filename().string()] = identity(e.path());
  }
}

fs::path RetryResume::newest_written_since() const {
  std::error_code ec;
  fs::path best;
  int64_t best_step = -1;
  if (!fs::is_directory(out_, ec)) return {};
  for (const auto& e : fs::directory_iterator(out_, ec)) {
    const std::string name = e.path().filename().string();
    const int64_t step = checkpoint_step(name);
    if (step <= best_step || !e.is_directory()) continue;
    if (auto it = before_.find(name); it != before_.end() && it->second == identity(e.path())) continue;
    if (!sealed_checkpoint_problem(e.path()).empty()) continue;  // a save that never finished
    best = e.path();
    best_step = step;
  }
  return best;
}

}  // namespace lf
