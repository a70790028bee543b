#include "lf/common/output_set.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <regex>

#include "lf/common/error.h"
#include "lf/common/output_lock.h"
#include "lf/common/remove_tree.h"

namespace lf {

namespace fs = std::filesystem;

namespace {

bool is_adapter_file(const std::string& name) {
  return name == "adapter_config.json" || name == "adapter_model.safetensors" || name == "adapter_model.bin";
}

// model.safetensors, model-00001-of-00002.safetensors, the index; the .bin forms.
bool is_model_weight_file(const std::string& name) {
  static const std::regex kWeights(
      R"((model|pytorch_model)(-\d+-of-\d+)?\.(safetensors|bin)|(model\.safetensors|pytorch_model\.bin)\.index\.json)");
  return std::regex_match(name, kWeights);
}

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file()) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

bool is_weight_file(const std::string& name) { return is_adapter_file(name) || is_model_weight_file(name); }

std::vector<std::string> stale_weight_files(const fs::path& out, OutputKind kind) {
  std::vector<std::string> stale;
  for (const auto& name : files_in(out))
    if (kind == OutputKind::kFullModel ? is_adapter_file(name) : is_model_weight_file(name)) stale.push_back(name);
  return stale;
}

std::vector<std::string> place_output_set(const fs::path& staged, const fs::path& out) {
  const auto mine = files_in(staged);
  std::vector<std::string> removed;
  for (const auto& name : files_in(out))
    if (is_weight_file(name) && std::find(mine.begin(), mine.end(), name) == mine.end()) removed.push_back(name);
  // Removed first: a crash between the two steps leaves no mix of two runs' weights.
  for (const auto& name : removed) fs::remove(out / name);
  if (!removed.empty())
    spdlog::warn("output_dir {}: removed {} of an earlier run ({}): they would be loaded with this run's outputs "
                 "(overwrite_output_dir: true)", out.string(), removed.size() == 1 ? "a file" : "files",
                 fmt::join(removed, ", "));
  for (const auto& name : mine) {
    std::error_code ec;
    fs::rename(staged / name, out / name, ec);
    LF_CHECK(!ec, ConfigError, "cannot move {} into {}: {}", (staged / name).string(), out.string(), ec.message());
  }
  remove_tree(staged);
  return removed;
}

bool output_dir_is_empty(const fs::path& out) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out, ec))
    if (e.path().filename().string().rfind(OutputLock::kFileName, 0) != 0) return false;
  return true;
}

fs::path output_staging_dir(const fs::path& out) { return out / ".final-outputs.tmp"; }

}  // namespace lf
