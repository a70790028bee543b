#include "export_command.h"

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "export_model.h"
#include "lf/config/export_config.h"
#include "vllm_check.h"

namespace lf {

void add_export_command(CLI::App& app) {
  auto args = std::make_shared<std::vector<std::string>>();
  auto* cmd = app.add_subcommand(
      "export", "Merge a LoRA adapter into its base model and write an HF model folder (llamafactory-cli export)");
  cmd->add_option("args", *args, "CONFIG.yaml (model_name_or_path, adapter_name_or_path, export_dir, ...), then "
                                 "key=value overrides")
      ->required();
  cmd->callback([args] {
    const std::vector<std::string> overrides(args->begin() + 1, args->end());
    const auto c = config::load_export_config(args->front(), overrides);
    for (const auto& n : c.notes) spdlog::info("{}", n);
    const auto r = export_model(c);
    spdlog::info("export: {}{} written to {} ({}, {} weight file{})", c.model_name_or_path,
                 c.adapter_name_or_path.empty() ? std::string()
                                                : fmt::format(" + {} ({} LoRA layers merged)", c.adapter_name_or_path,
                                                              r.merged_layers),
                 c.export_dir, r.dtype, r.weight_files.size(), r.weight_files.size() == 1 ? "" : "s");
    report_vllm_readiness(c.export_dir, c.model_name_or_path);
  });
}

}  // namespace lf
