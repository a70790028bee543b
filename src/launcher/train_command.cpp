#include "train_command.h"

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>

#include "agent_flags.h"
#include "lf/agent/gpu_inventory.h"
#include "lf/common/env.h"
#include "lf/common/error.h"
#include "lf/common/hash.h"
#include "lf/config/train_config.h"

namespace lf {

namespace fs = std::filesystem;

namespace {

// lf-worker sits beside lf-train when installed, in ../worker/ in a build tree;
// LF_WORKER_BIN overrides both.
std::string find_worker_binary() {
  if (auto v = env_string("LF_WORKER_BIN")) return *v;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  for (const fs::path& candidate : {self.parent_path() / "lf-worker", self.parent_path() / ".." / "worker" / "lf-worker"})
    if (!ec && fs::exists(candidate)) return fs::weakly_canonical(candidate).string();
  LF_THROW(ConfigError,
           "lf-worker (the trainer) was not found beside {}: build with -DLF_WITH_TORCH=ON (scripts/build.sh does when "
           ".venv exists), or point LF_WORKER_BIN at it", self.string());
}

// The checks a user hits first, made before any node is kept waiting.
void check_model_folder(const config::TrainConfig& c) {
  fs::path dir(c.model_name_or_path);
  if (fs::is_directory(dir)) {
    LF_CHECK(fs::exists(dir / "config.json"), ConfigError, "model folder '{}' has no config.json", dir.string());
    return;
  }
  bool looks_like_hub_id = c.model_name_or_path.find('/') != std::string::npos && !fs::exists(dir.parent_path());
  LF_THROW(ConfigError,
           "model_name_or_path '{}' is not a local folder. lf-train never downloads: {}", c.model_name_or_path,
           looks_like_hub_id ? "fetch it first with `huggingface-cli download " + c.model_name_or_path +
                                   " --local-dir models/" + fs::path(c.model_name_or_path).filename().string() +
                                   "` and set model_name_or_path to that folder"
                             : std::string("check the path"));
}

}  // namespace

bool looks_like_config_path(const char* arg) {
  std::string_view a(arg);
  for (std::string_view suffix : {".yaml", ".yml", ".json"})
    if (a.size() > suffix.size() && a.substr(a.size() - suffix.size()) == suffix) return true;
  return false;
}

void add_train_command(CLI::App& app) {
  auto flags = std::make_shared<LaunchFlags>();
  auto args = std::make_shared<std::vector<std::string>>();
  auto* cmd = app.add_subcommand("train", "Fine-tune from a LLaMA-Factory YAML: lf-train train CONFIG.yaml [key=value ...]");
  add_agent_flags(cmd, *flags);
  cmd->add_option("args", *args, "CONFIG.yaml, then key=value overrides")->required();
  cmd->callback([flags, args] {
    const std::string& path = args->front();
    std::vector<std::string> overrides(args->begin() + 1, args->end());
    config::LoadedConfig loaded = config::load_train_config(path, overrides);
    for (const auto& w : loaded.warnings) spdlog::warn("{}", w);
    for (const auto& i : loaded.infos) spdlog::info("{}", i);
    check_model_folder(loaded.config);
    apply_environment(*flags);
    auto& opt = flags->opt;
    // One worker per visible GPU unless told otherwise; never more workers than GPUs.
    int gpus = agent::visible_gpu_count_from_env();
    if (flags->nproc <= 0 && !env_string("NPROC_PER_NODE") && gpus > 0) opt.nproc = gpus;
    LF_CHECK(gpus == 0 || opt.nproc <= gpus, ConfigError,
             "NPROC_PER_NODE / --nproc-per-node {} asks for more workers than the {} visible GPU(s){}: one worker per "
             "GPU", opt.nproc, gpus,
             env_string("CUDA_VISIBLE_DEVICES") ? " (CUDA_VISIBLE_DEVICES=" + *env_string("CUDA_VISIBLE_DEVICES") + ")"
                                                : std::string());
    opt.command = {find_worker_binary(), "train", fs::absolute(path).string()};
    opt.command.insert(opt.command.end(), overrides.begin(), overrides.end());
    // Nodes must agree on the effective config, not on how it was spelt.
    opt.config_hash = hex64(fnv1a64(loaded.canonical));
    spdlog::info("training {} ({}) with {} worker(s) on this node; outputs in {}", loaded.config.model_name_or_path,
                 loaded.config.finetuning_type, opt.nproc, loaded.config.output_dir);
    throw CLI::RuntimeError(agent::run_agent(opt));
  });
}

}  // namespace lf
