#include "train_command.h"

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>

#include "agent_flags.h"
#include "preflight.h"
#include "lf/agent/gpu_inventory.h"
#include "lf/common/env.h"
#include "lf/common/env_knobs.h"
#include "lf/common/error.h"
#include "lf/common/hash.h"
#include "lf/config/sharding.h"
#include "lf/config/train_config.h"
#include "lf/rendezvous/config_diff.h"

namespace lf {

namespace fs = std::filesystem;

namespace {

// lf-worker sits beside lf-train when installed, in ../worker/ in a build tree;
// LF_WORKER_BIN overrides both.
std::string find_worker_binary() {
  if (auto v = knob_string("LF_WORKER_BIN")) return *v;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  for (const fs::path& candidate : {self.parent_path() / "lf-worker", self.parent_path() / ".." / "worker" / "lf-worker"})
    if (!ec && fs::exists(candidate)) return fs::weakly_canonical(candidate).string();
  LF_THROW(ConfigError,
           "lf-worker (the trainer) was not found beside {}: build with -DLF_WITH_TORCH=ON (scripts/build.sh does when "
           ".venv exists), or point LF_WORKER_BIN at it", self.string());
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
    for (const auto& n : loaded.notes) spdlog::info("{}", n);
    for (const auto& note : preflight_training(loaded.config)) spdlog::warn("{}", note);
    // Printed here once for this node; the workers leave them out.
    ::setenv("LF_CONFIG_CHECKED", "1", 1);
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
    // With a fixed number of nodes the world size is known here: a DeepSpeed train_batch_size
    // that cannot hold fails now, not once every node has joined (the workers check it too).
    if (opt.min_nodes == opt.max_nodes) config::check_world_size(loaded.config, opt.min_nodes * opt.nproc);
    opt.command = {find_worker_binary(), "train", fs::absolute(path).string()};
    opt.command.insert(opt.command.end(), overrides.begin(), overrides.end());
    // Nodes must agree on the effective config, not on how it was spelt.
    opt.config_hash = hex64(fnv1a64(loaded.canonical));
    for (const auto& [key, value] : loaded.items) opt.config_items.push_back(rdzv::config_item(key, value));
    spdlog::info("training {} ({}) with {} worker(s) on this node; outputs in {}", loaded.config.model_name_or_path,
                 loaded.config.finetuning_type, opt.nproc, loaded.config.output_dir);
    throw CLI::RuntimeError(agent::run_agent(opt));
  });
}

}  // namespace lf
