#pragma once
// HF's `report_to`: which integrations get the training logs. lf-train writes TensorBoard
// event files itself (output_dir/runs/, lf/tfevents/scalar_log.h); nothing reaches the
// other services (wandb, mlflow, ...) from here, so each of those is one info line.
// Internal to src/config.
#include "config_reader.h"
#include "lf/config/train_config.h"

namespace lf::config {

// Normalises out.plan.logging.report_to (read as a list: "tensorboard,wandb" or [..]) to
// {"tensorboard"} or {} ("all" means tensorboard here; "none" nothing); a name HF does not
// know is a ConfigError listing the ones it does; adds one note per integration without
// effect.
void resolve_report_to(const Reader& r, LoadedConfig& out);

}  // namespace lf::config
