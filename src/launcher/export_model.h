#pragma once
// `lf-train export`: a PEFT LoRA adapter merged into its base model, written as a Hugging Face
// model folder that transformers and vLLM load: W' = W + (lora_alpha / r) · B·A for every
// adapted linear layer (B [out, r], A [r, in], summed in fp32, as peft's merge_and_unload()),
// every other tensor copied; safetensors sharded at export_size GB with
// model.safetensors.index.json; config.json (torch_dtype set to the export dtype),
// generation_config.json and the tokenizer files (the adapter folder's when it has them:
// LLaMA-Factory saves the tokenizer with the adapter) copied. Torch-free: one tensor in
// memory at a time, so a 7B model exports in the host memory of its largest tensor.
#include <filesystem>
#include <string>
#include <vector>

#include "lf/config/export_config.h"

namespace lf {

struct ExportResult {
  std::vector<std::filesystem::path> weight_files;  // shards, then the index when sharded
  int64_t merged_layers = 0;
  std::string dtype;  // float32 | bfloat16 | float16
};

// Throws ConfigError naming the file and tensor when the adapter does not fit the base.
ExportResult export_model(const config::ExportConfig& config);

}  // namespace lf
