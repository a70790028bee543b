#pragma once
// The worker's `train` entry point: config -> tokenizer + SFT data (lf_data) ->
// model (+ LoRA) (lf_model) -> Trainer -> outputs in output_dir. One process, one
// device (CUDA device LOCAL_RANK when a GPU is visible, else CPU).
#include "lf/config/train_config.h"

namespace lf::train {

// Runs the whole job; returns kExitOk, or logs a typed error (lf::Error) and returns
// its exit code (exit_codes.h): kExitConfig for bad config/data/model input and for a
// NaN/inf loss (message names the step), kExitInternal for anything unexpected.
int run_training(const config::LoadedConfig& loaded);

// The same, throwing the typed errors instead of mapping them (tests, embedding).
void train_from_config(const config::LoadedConfig& loaded);

}  // namespace lf::train
