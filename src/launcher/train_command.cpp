#include "train_command.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>

#include "agent_flags.h"
#include "preflight.h"
#include "own_arguments.h"
#include "plan_command.h"
#include "retry_loop.h"
#include "ssh_fanout.h"
#include "vllm_check.h"
#include "lf/agent/gpu_inventory.h"
#include "lf/common/env.h"
#include "lf/common/env_knobs.h"
#include "lf/common/error.h"
#include "lf/common/hash.h"
#include "lf/common/output_lock.h"
#include "lf/config/sharding.h"
#include "lf/config/train_config.h"
#include "lf/data/preview_samples.h"
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

// Node 0 by its flags or environment: it holds output_dir's lock for the run's life (across
// --retries attempts too). Nodes ranked by arrival decide in the agent, when one hosts the
// rendezvous (AgentOptions::output_lock_dir).
bool node0_by_setting(const LaunchFlags& f) {
  const auto nn = parse_nnodes(!f.nnodes.empty() ? f.nnodes : env_string("NNODES").value_or("1"));
  const int64_t rank = f.node_rank >= 0 ? f.node_rank : env_int("NODE_RANK").value_or(-1);
  return rank == 0 || (rank < 0 && nn.second == 1);
}

std::string job_label(const LaunchFlags& f, const std::string& config_path) {
  return fmt::format("{} ({})", !f.rdzv_id.empty() ? f.rdzv_id : env_string("RDZV_ID").value_or("none"),
                     fs::absolute(config_path).string());
}

// The live page's header and data preview (node 0 serves it; lf/ui/job_page.h): the job's own
// datasets through its template, the first kPreviewSamples examples.
void set_page_contents(agent::AgentOptions& opt, const config::JobPlan& plan, const std::string& config_path) {
  constexpr int kPreviewSamples = 5;
  opt.ui_facts = {{"model", plan.model.model_name_or_path},
                  {"method", plan.objective.stage + ", " + plan.adapter.finetuning_type},
                  {"datasets", fmt::format("{}", fmt::join(plan.data.dataset, ", "))},
                  {"output_dir", plan.output.output_dir},
                  {"config", fs::absolute(config_path).string()}};
  opt.ui_preview = [data = plan.data] { return preview_samples_json(data, kPreviewSamples); };
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
  auto retry = std::make_shared<RetryOptions>();
  auto* cmd = app.add_subcommand("train", "Fine-tune from a LLaMA-Factory YAML: lf-train train CONFIG.yaml [key=value ...]");
  add_agent_flags(cmd, *flags);
  cmd->add_option("args", *args, "CONFIG.yaml, then key=value overrides")->required();
  cmd->add_option("--retries", retry->retries,
                  "Run the job again up to N times after a retryable failure (a lost node, the network, a deadline, "
                  "NCCL, a killed worker or agent; never exit 2), resumed from the last checkpoint (default 0)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--retry-wait", retry->retry_wait_s, "Seconds between a failed attempt and the next (default 30)")
      ->check(CLI::NonNegativeNumber);
  cmd->callback([flags, args, retry] {
    const std::string& path = args->front();
    std::vector<std::string> overrides(args->begin() + 1, args->end());
    config::LoadedConfig loaded = config::load_train_config(path, overrides);
    for (const auto& w : loaded.warnings) spdlog::warn("{}", w);
    for (const auto& n : loaded.notes) spdlog::info("{}", n);
    for (const auto& note : preflight_training(loaded.plan)) spdlog::warn("{}", note);
    // One job per output_dir (output_lock.h): a second job on it exits 2 here, naming this one.
    // (--hostfile: this process is no node; node 0's own lf-train takes it.)
    std::unique_ptr<OutputLock> lock;
    if (flags->hostfile.empty() && node0_by_setting(*flags))
      lock = OutputLock::acquire(loaded.plan.output.output_dir, job_label(*flags, path));
    // The supervisor checked the config (a bad one exits 2 now); each attempt is a child lf-train,
    // which adopts the lock the supervisor holds and renews.
    if (retry->retries > 0) {
      if (lock) ::setenv(knob_name("LF_OUTPUT_LOCK_HELD"), lock->nonce().c_str(), 1);
      throw CLI::RuntimeError(run_with_retries(*retry, loaded.plan, own_arguments()));
    }
    if (!flags->hostfile.empty()) throw CLI::RuntimeError(run_hostfile(*flags));
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
    if (opt.min_nodes == opt.max_nodes) config::check_world_size(loaded.plan, opt.min_nodes * opt.nproc);
    opt.command = {find_worker_binary(), "train", fs::absolute(path).string()};
    opt.command.insert(opt.command.end(), overrides.begin(), overrides.end());
    // Nodes must agree on the effective config, not on how it was spelt.
    opt.config_hash = hex64(fnv1a64(loaded.canonical));
    for (const auto& [key, value] : loaded.items) opt.config_items.push_back(rdzv::config_item(key, value));
    if (!lock && opt.host_server_if_free) {
      opt.output_lock_dir = loaded.plan.output.output_dir;
      opt.output_lock_job = job_label(*flags, path);
    }
    if (opt.ui_port >= 0) set_page_contents(opt, loaded.plan, path);
    spdlog::info("training {} ({}) with {} worker(s) on this node; outputs in {}", loaded.plan.model.model_name_or_path,
                 loaded.plan.adapter.finetuning_type, opt.nproc, loaded.plan.output.output_dir);
    // What will run (`lf-train plan`'s summary without the data counts), once per node.
    spdlog::info("plan:\n{}", run_plan_summary(loaded.plan, opt.min_nodes, opt.nproc));
    const int code = agent::run_agent(opt);
    // Node 0 says whether output_dir is what vLLM serves (the folder is shared by every node).
    if (code == 0 && opt.host_server) report_vllm_readiness(loaded.plan.output.output_dir, loaded.plan.model.model_name_or_path);
    throw CLI::RuntimeError(code);
  });
}

}  // namespace lf
