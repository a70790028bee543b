#pragma once
// What vLLM reads from a model folder or a LoRA adapter folder, checked from vLLM's side after
// `lf-train CONFIG` (its output_dir) and `lf-train export` (its export_dir), so that a folder
// `vllm serve` would refuse is said here, with what to do, instead of on the serving host:
// - a model folder: config.json with `architectures` and `torch_dtype`, the weights
//   (model.safetensors, or the index and every shard it names), tokenizer_config.json with a
//   chat template (or chat_template.jinja), generation_config.json when the base has one;
// - an adapter: adapter_config.json with `r`, `lora_alpha`, `target_modules`, `bias: none`;
//   `modules_to_save` and an `r` above vLLM's --max-lora-rank (default 16, at most 512) are
//   named with what vLLM will refuse. Torch-free.
#include <filesystem>
#include <string>
#include <vector>

namespace lf {

// One line per problem; empty: ready. `base`: the model the folder came from ("" unknown).
std::vector<std::string> vllm_model_folder_problems(const std::filesystem::path& dir,
                                                    const std::filesystem::path& base = {});
std::vector<std::string> vllm_adapter_problems(const std::filesystem::path& dir);

// Checks output_dir (adapter or model) and logs the problems as warnings, or the
// `vllm serve` line when there are none.
void report_vllm_readiness(const std::filesystem::path& dir, const std::filesystem::path& base);

}  // namespace lf
