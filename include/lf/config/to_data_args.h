#pragma once
// The data pipeline's arguments from a parsed TrainConfig: every key the schema
// (src/config/config_schema.cpp) maps to a DataArgs member, and nothing by hand.
// Torch-free. base_dir stays "." (LLaMA-Factory resolves paths against the working
// directory).
#include "lf/config/train_config.h"
#include "lf/data/data_args.h"

namespace lf::config {

DataArgs to_data_args(const TrainConfig& c);

}  // namespace lf::config
