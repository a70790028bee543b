#pragma once
// LoRA on a CausalLM, PEFT-compatible: same math (y = W x + B A dropout(x) * alpha/r),
// same adapter files (adapter_model.safetensors keys
// "base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight", adapter_config.json
// fields), so a peft user loads our adapter and we load theirs.
//
// Training layout: the base is frozen (requires_grad false, e.g. bf16), A/B are fp32
// and trainable; the LoRA path computes in the activation dtype (autocast semantics).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "lf/model/causal_lm.h"

namespace lf::model {

struct LoraConfig {
  int64_t rank = 8;
  double alpha = -1;    // <= 0: 2 * rank
  double dropout = 0.0;
  // "all" = every linear layer of the decoder (not lm_head), or module short names
  // (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj).
  std::vector<std::string> target = {"all"};
  uint64_t seed = 0;

  double effective_alpha() const { return alpha > 0 ? alpha : 2.0 * static_cast<double>(rank); }
};

// Parses LLaMA-Factory's lora_target ("all" or "q_proj,v_proj").
std::vector<std::string> parse_lora_target(const std::string& text);

// Adds A ([r,in], kaiming-uniform like peft) and B ([out,r], zero) in fp32 on the
// model's device to every targeted Linear, freezes the base parameters and returns
// the module short names targeted. ConfigError if a target names no module.
std::vector<std::string> apply_lora(CausalLM& model, const LoraConfig& config);

// The LoRA parameters with PEFT's saved names, layer by layer (A then B).
std::vector<NamedParam> lora_parameters(CausalLM& model);

// What training updates: the LoRA parameters when `lora`, else every base parameter (made to
// require grad), in model order with HF / PEFT names.
std::vector<NamedParam> trainable_parameters(CausalLM& model, bool lora);

// adapter_model.safetensors (fp32 A/B, PEFT names) + adapter_config.json. value_of / write_files
// as in SaveOptions (loader.h): a sharded strategy's gathered values, every rank calling.
void save_lora_adapter(CausalLM& model, const LoraConfig& config, const std::filesystem::path& dir,
                       const std::string& base_model_name_or_path,
                       const std::function<at::Tensor(const NamedParam&)>& value_of = {}, bool write_files = true);

// Reads adapter_config.json, applies LoRA as it says, loads A/B (names checked).
LoraConfig load_lora_adapter(CausalLM& model, const std::filesystem::path& dir);

}  // namespace lf::model
