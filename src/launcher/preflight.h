#pragma once
// The checks `lf-train CONFIG` makes on every node before the rendezvous, so that
// what would fail after the model loaded (or after every node waited) fails in
// milliseconds with what to do: the model folder (config.json, a known
// architecture, complete safetensors, where the initial weights come from), the
// output folder (writable, room for a checkpoint), and checkpoints that
// overwrite_output_dir is about to discard. Torch-free.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "lf/config/train_config.h"

namespace lf {

// Throws ConfigError. Returns lines to print once (warnings that are not errors).
std::vector<std::string> preflight_training(const config::JobPlan& c);

// Bytes one checkpoint of this run writes (trainable parameters x (4 weight + 8 AdamW
// moment bytes); a full run's weights are fp32 masters), from config.json alone.
uint64_t predicted_checkpoint_bytes(const config::JobPlan& c, const std::filesystem::path& config_json);

// The download hint for a model_name_or_path that is no local folder: a repository id
// (`Qwen/Qwen2.5-7B-Instruct`) for a hub id or a local path named after a known model.
std::string download_hint(const std::string& model_name_or_path);

}  // namespace lf
