#include "plan_command.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>

#include "agent_flags.h"
#include "lf/agent/gpu_inventory.h"
#include "lf/common/env.h"
#include "lf/common/error.h"
#include "lf/config/train_config.h"
#include "lf/data/sft_dataset.h"
#include "lf/model/config.h"
#include "lf/plan/plan_summary.h"

namespace lf {
namespace fs = std::filesystem;

namespace {

struct PlanFlags {
  std::vector<std::string> args;  // CONFIG, then key=value
  std::string nnodes;
  int64_t nproc = 0;
  bool json = false, no_data = false;
};

fs::path config_json_of(const config::JobPlan& plan) {
  const fs::path src(plan.model.model_name_or_path);
  return fs::is_directory(src) ? src / "config.json" : src;
}

// The world as `lf-train CONFIG` takes it: flags, then NNODES / NPROC_PER_NODE, then one worker
// per visible GPU (one without GPUs). An elastic MIN:MAX plans for MIN nodes (the most per rank).
plan::WorldLayout world_of(const PlanFlags& f) {
  const auto nodes = parse_nnodes(!f.nnodes.empty() ? f.nnodes : env_string("NNODES").value_or("1"));
  int64_t nproc = f.nproc > 0 ? f.nproc : env_int("NPROC_PER_NODE").value_or(0);
  if (nproc <= 0) nproc = std::max(1, agent::visible_gpu_count_from_env());
  return {nodes.first, nproc};
}

// The data pipeline's counts after preprocessing (tokenized, packed, split): what training would load.
nlohmann::json data_counts(const config::JobPlan& plan) {
  try {
    const auto tokenizer = load_tokenizer_for(plan.data);
    const auto data = load_sft_data(plan.data, tokenizer);
    return {{"train_examples", data.train.size()}, {"eval_examples", data.eval.size()},
            {"train_tokens", data.train.num_tokens()}, {"from_cache", data.from_cache}};
  } catch (const std::exception& e) {  // no tokenizer in a config.json-only folder, a missing dataset
    return {{"skipped", e.what()}};
  }
}

int run_plan(const PlanFlags& f) {
  const std::string& path = f.args.front();
  const auto loaded = config::load_train_config(path, std::vector<std::string>(f.args.begin() + 1, f.args.end()));
  const auto world = world_of(f);
  const auto mc = model::load_model_config(config_json_of(loaded.plan));
  auto summary = plan::plan_summary(loaded.plan, mc, world);
  summary["config"] = path;
  if (!f.no_data) summary["data"] = data_counts(loaded.plan);
  if (f.json) {
    std::fputs((summary.dump(2) + "\n").c_str(), stdout);
    return kExitOk;
  }
  for (const auto& w : loaded.warnings) std::fprintf(stderr, "lf-train: warning: %s\n", w.c_str());
  std::fputs(("lf-train plan: " + path + "\n" + plan::plan_summary_text(summary)).c_str(), stdout);
  return kExitOk;
}

}  // namespace

std::string run_plan_summary(const config::JobPlan& plan, int64_t nnodes, int64_t nproc) {
  try {
    const auto mc = model::load_model_config(config_json_of(plan));
    return plan::plan_summary_text(plan::plan_summary(plan, mc, {nnodes, nproc}));
  } catch (const Error& e) {
    return fmt::format("  (no plan summary: {})\n", e.what());
  }
}

void add_plan_command(CLI::App& app) {
  auto f = std::make_shared<PlanFlags>();
  auto* cmd = app.add_subcommand("plan",
                                 "What a job will run, resolved from its config without running it: world and global "
                                 "batch, strategy, units, buckets, offload, predicted bytes per rank, kernels, data");
  cmd->add_option("args", f->args, "CONFIG.yaml, then key=value overrides")->required();
  cmd->add_option("--nnodes", f->nnodes, "Number of nodes, N or MIN:MAX (env NNODES; default 1)");
  cmd->add_option("--nproc-per-node,--nproc_per_node", f->nproc,
                  "Workers per node (env NPROC_PER_NODE; default one per visible GPU, else 1)");
  cmd->add_flag("--json", f->json, "One JSON object, for scripts");
  cmd->add_flag("--no-data", f->no_data, "Skip the data counts (no tokenization)");
  cmd->callback([f] { throw CLI::RuntimeError(run_plan(*f)); });
}

}  // namespace lf
