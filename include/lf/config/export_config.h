#pragma once
// `lf-train export CONFIG.yaml [key=value ...]`: LLaMA-Factory's `llamafactory-cli export` YAML
// (examples/merge_lora/*.yaml): model_name_or_path (the base), adapter_name_or_path (a PEFT
// LoRA folder; absent: the base is rewritten, e.g. to another dtype or shard size),
// export_dir, export_size (GB per shard), infer_dtype. Training keys in the same file are
// accepted and ignored (LLaMA-Factory's export YAMLs carry template, finetuning_type, ...);
// an unknown key is an error with did-you-mean, a quantized, legacy (.bin) or hub export is
// refused. Torch-free.
#include <string>
#include <vector>

namespace lf::config {

struct ExportConfig {
  std::string model_name_or_path;
  std::string adapter_name_or_path;  // "" : no adapter
  std::string export_dir;
  double export_size_gb = 5;          // LLaMA-Factory's default; HF's GB (10^9 bytes)
  std::string infer_dtype = "auto";   // auto | float32 | bfloat16 | float16
  std::vector<std::string> notes;     // keys read and ignored, said once
};

ExportConfig load_export_config(const std::string& path, const std::vector<std::string>& overrides);

}  // namespace lf::config
