#pragma once
// `pissa_convert` (LLaMA-Factory's PissaConvertCallback): output_dir/pissa_init/ (the adapter as training
// starts), and once training ends output_dir/pissa_backup/ (the trained adapter) and pissa_converted/ (an
// ordinary LoRA adapter for the original base, as peft's save_pretrained(path_initial_model_for_weight_conversion)
// writes it: A' = [A; A0], B' = [B, -B0], rank 2r, lora_alpha 2 alpha (rsLoRA: sqrt(2) alpha), so that
// B'A' = BA - B0A0 is the change from the base the PiSSA residual came from). Internal to lf_train.
#include <filesystem>
#include <string>

#include "lf/model/causal_lm.h"
#include "lf/model/lora.h"

namespace lf::parallel {
class ParallelStrategy;
}

namespace lf::train {

// Every rank calls (a sharded strategy gathers); rank `write` writes out/pissa_init/.
void save_pissa_init(model::CausalLM& model, const model::LoraConfig& lora, parallel::ParallelStrategy& strategy,
                     const std::filesystem::path& out, const std::string& base_model, bool write);
// From out/adapter_model.safetensors + adapter_config.json and out/pissa_init/: pissa_backup/ and pissa_converted/.
void write_pissa_conversion(const std::filesystem::path& out);

}  // namespace lf::train
