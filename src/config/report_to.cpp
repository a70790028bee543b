#include "report_to.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <set>

namespace lf::config {

void resolve_report_to(const Reader& r, LoadedConfig& out) {
  // transformers' integrations (transformers.integrations.get_available_reporting_integrations).
  static const std::set<std::string> kIntegrations = {
      "azure_ml", "clearml", "codecarbon", "comet_ml", "dagshub", "dvclive", "flyte",
      "mlflow",   "neptune", "swanlab",    "tensorboard", "trackio", "wandb"};
  std::vector<std::string> resolved;
  for (std::string v : out.plan.logging.report_to) {
    std::transform(v.begin(), v.end(), v.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    if (v == "none") continue;
    LF_CHECK(v == "all" || kIntegrations.count(v), ConfigError,
             "{}: `report_to: {}` is not an integration transformers knows; expected tensorboard (written by "
             "lf-train), none, all, or one of: {}",
             r.where("report_to"), v, fmt::join(kIntegrations, ", "));
    if (v == "all" || v == "tensorboard") {
      if (resolved.empty()) resolved.push_back("tensorboard");
      continue;
    }
    out.notes.push_back(fmt::format("{}: `report_to: {}` has no effect in lf-train (nothing reaches that service from "
                                    "here); `report_to: tensorboard` writes event files to output_dir/runs/, and "
                                    "--metrics-port serves live metrics to Prometheus",
                                    r.where("report_to"), v));
  }
  out.plan.logging.report_to = std::move(resolved);
}

}  // namespace lf::config
