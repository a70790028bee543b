#pragma once
// Where the plan's parallel section come from: lf-train's `zero_stage` / `offload`,
// a DeepSpeed JSON (`deepspeed:`) or HF's `fsdp:` / `fsdp_config:`. One source, or
// several that agree; the same thing said two ways that disagree is a ConfigError
// naming both. Runs after every other key is read and validated (it needs batch
// sizes, precision and the optimizer). Internal to src/config.
#include <string>

#include "config_reader.h"
#include "lf/config/train_config.h"

namespace lf::config {

// Sets zero_stage, offload, overlap_comm, the bucket sizes, pin_memory, sharding_source
// and train_batch_size; adds warnings/notes; appends the content of the files read to
// `canonical` (so two nodes with different files at one path disagree).
void resolve_sharding(const Reader& r, const std::string& config_dir, LoadedConfig& out);

}  // namespace lf::config
