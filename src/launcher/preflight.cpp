#include "preflight.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "lf/common/disk_space.h"
#include "lf/common/error.h"
#include "lf/common/output_set.h"
#include "lf/model/config.h"
#include "lf/model/initial_weights.h"
#include "lf/plan/model_units.h"

namespace lf {

namespace fs = std::filesystem;

namespace {

std::string gib(uint64_t bytes) { return size_text(static_cast<double>(bytes)); }

// Organisations of the models people fine-tune with LLaMA-Factory, by folder-name prefix.
std::string repository_of(const std::string& folder_name) {
  static const std::pair<const char*, const char*> kOrgs[] = {
      {"Qwen", "Qwen"},           {"QwQ", "Qwen"},          {"Meta-Llama", "meta-llama"}, {"Llama", "meta-llama"},
      {"Mistral", "mistralai"},   {"Mixtral", "mistralai"}, {"gemma", "google"},          {"phi", "microsoft"},
      {"Phi", "microsoft"},       {"DeepSeek", "deepseek-ai"}, {"Yi-", "01-ai"},          {"internlm", "internlm"},
      {"SmolLM", "HuggingFaceTB"}, {"TinyLlama", "TinyLlama"}};
  for (const auto& [prefix, org] : kOrgs)
    if (folder_name.rfind(prefix, 0) == 0) return std::string(org) + "/" + folder_name;
  return "ORG/" + folder_name;
}

void check_model_folder(const config::JobPlan& c) {
  const fs::path dir(c.model.model_name_or_path);
  if (fs::is_directory(dir)) {
    LF_CHECK(fs::exists(dir / "config.json"), ConfigError, "model folder '{}' has no config.json", dir.string());
    return;
  }
  if (fs::is_regular_file(dir)) return;  // a config.json alone: init_weights decides (random only)
  LF_THROW(ConfigError, "model_name_or_path '{}' is not a local folder. lf-train never downloads: {}",
           c.model.model_name_or_path, download_hint(c.model.model_name_or_path));
}

// The nearest folder that exists at or above `p` (where output_dir will be created).
fs::path existing_ancestor(fs::path p) {
  p = fs::absolute(p);
  while (!p.empty() && !fs::exists(p) && p != p.root_path()) p = p.parent_path();
  return p;
}

void check_output_dir(const config::JobPlan& c, uint64_t need, std::vector<std::string>& notes) {
  const fs::path out = fs::absolute(c.output.output_dir);
  LF_CHECK(!fs::exists(out) || fs::is_directory(out), ConfigError, "output_dir {} exists and is not a folder",
           out.string());
  const fs::path at = existing_ancestor(out);
  // access() answers EROFS for a read-only mount even for root, EACCES for permissions.
  if (::access(at.c_str(), W_OK | X_OK) != 0) {
    const int err = errno;
    LF_THROW(ConfigError, "output_dir {} cannot be written: {} {} ({}){}; choose an output_dir on a writable disk",
             out.string(), at == out ? "it is" : "its parent " + at.string() + " is",
             err == EROFS ? "on a read-only filesystem" : "not writable", std::strerror(err),
             err == EROFS ? " (a read-only mount or bind mount?)" : "");
  }
  struct statvfs vfs {};
  if (need == 0 || ::statvfs(at.c_str(), &vfs) != 0) return;
  const uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  LF_CHECK(free_bytes >= need, ConfigError,
           "output_dir {} is on a filesystem with {} free, but one checkpoint of this run needs about {} ({} "
           "fine-tuning: trainable weights in fp32 plus AdamW's two moments); free some space or choose another "
           "output_dir",
           out.string(), gib(free_bytes), gib(need), c.adapter.finetuning_type);
  if (free_bytes < 3 * need)
    notes.push_back(fmt::format("output_dir {}: {} free, room for {} checkpoint(s) of about {} each (save_total_limit "
                                "bounds how many are kept)",
                                out.string(), gib(free_bytes), free_bytes / need, gib(need)));
}

// overwrite_output_dir: true starts at step 0 and writes over what is there: say which
// checkpoints that discards (a retry loop around lf-train would otherwise restart silently).
void note_discarded_checkpoints(const config::JobPlan& c, std::vector<std::string>& notes) {
  if (!c.output.overwrite_output_dir || !c.output.resume_from_checkpoint.empty() || !fs::is_directory(c.output.output_dir)) return;
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(c.output.output_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || name.rfind("checkpoint-", 0) != 0) continue;
    try {
      steps.push_back(std::stoll(name.substr(11)));
    } catch (const std::exception&) {
    }
  }
  if (steps.empty()) return;
  std::sort(steps.begin(), steps.end());
  notes.push_back(fmt::format(
      "overwrite_output_dir: true: training starts at step 0 and writes over {}; its checkpoint(s) at step(s) {} are "
      "not resumed (set overwrite_output_dir: false, or resume_from_checkpoint: {}/checkpoint-{}, to continue)",
      c.output.output_dir, fmt::join(steps, ", "), c.output.output_dir, steps.back()));
}

// Weight files of the other kind in output_dir would be loaded with this run's outputs. With
// overwrite_output_dir they are removed when this run's outputs are placed (output_set.h);
// without it the run is refused now, not after training.
void check_stale_outputs(const config::JobPlan& c) {
  if (c.output.overwrite_output_dir) return;
  const bool adapter = c.adapter.finetuning_type == "lora";
  const auto stale = stale_weight_files(c.output.output_dir, adapter ? OutputKind::kAdapter : OutputKind::kFullModel);
  LF_CHECK(stale.empty(), ConfigError,
           "output_dir {} holds {} of an earlier {} run ({}), which transformers, peft and vLLM would load with this "
           "{} run's outputs: set overwrite_output_dir: true to have {} removed when this run's outputs are written, or "
           "choose another output_dir",
           c.output.output_dir, stale.size() == 1 ? "a file" : "files", adapter ? "full or freeze" : "LoRA",
           fmt::join(stale, ", "), adapter ? "LoRA" : c.adapter.finetuning_type, stale.size() == 1 ? "it" : "them");
}

}  // namespace

std::string download_hint(const std::string& path) {
  const fs::path p(path);
  const std::string known = repository_of(p.filename().string());  // "Qwen/Qwen2.5-7B-Instruct" or "ORG/..."
  // ORG/NAME with no such local ORG folder is a repository id, unless NAME is a model we know
  // under another organisation (models/Qwen2.5-7B-Instruct is a local path: Qwen/...).
  const bool hub_id = std::count(path.begin(), path.end(), '/') == 1 && path.front() != '/' &&
                      path.front() != '.' && !fs::exists(p.parent_path()) &&
                      (known == path || known.rfind("ORG/", 0) == 0);
  const std::string repo = hub_id ? path : known;
  const std::string local = hub_id ? "models/" + p.filename().string() : path;
  return fmt::format("fetch it first with `huggingface-cli download {} --local-dir {}`{}", repo, local,
                     hub_id ? " and set model_name_or_path to that folder" : "");
}

uint64_t predicted_checkpoint_bytes(const config::JobPlan& c, const fs::path& config_json) {
  // The worker's rule (disk_space.h): fp32 weights and two moments a trainable parameter.
  const auto trainable = plan::parameter_counts(model::load_model_config(config_json), c.adapter).trainable;
  return save_bytes_needed(static_cast<uint64_t>(trainable), c.output.save_strategy != "no");
}

std::vector<std::string> preflight_training(const config::JobPlan& c) {
  std::vector<std::string> notes;
  check_model_folder(c);
  const fs::path dir(c.model.model_name_or_path);
  const fs::path config_json = fs::is_directory(dir) ? dir / "config.json" : dir;
  // An architecture lf-train does not implement fails here, with the worker's message.
  const uint64_t need = predicted_checkpoint_bytes(c, config_json);
  const auto weights = model::choose_initial_weights(dir, c.model.init_weights, c.seed);
  if (!weights.note.empty()) notes.push_back(weights.note);
  check_output_dir(c, need, notes);
  note_discarded_checkpoints(c, notes);
  check_stale_outputs(c);
  return notes;
}

}  // namespace lf
