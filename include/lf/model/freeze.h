#pragma once
// LLaMA-Factory's `finetuning_type: freeze` (_setup_freeze_tuning): full fine-tuning of a part of
// the model, the rest frozen. Trainable: in each of the last `freeze_trainable_layers` decoder layers
// (the first -N when negative) the modules `freeze_trainable_modules` names (self_attn, mlp,
// input_layernorm, post_attention_layernorm, or all), plus every parameter whose name holds one of
// `freeze_extra_modules` (embed_tokens, norm, lm_head: a plain substring, as LLaMA-Factory matches,
// so "norm" is every norm). Trainable parameters are fp32 master weights as in full fine-tuning.
#include <cstdint>
#include <string>
#include <vector>

#include "lf/model/causal_lm.h"

namespace lf::model {

struct FreezeConfig {
  int64_t trainable_layers = 2;
  std::vector<std::string> trainable_modules = {"all"};
  std::vector<std::string> extra_modules;
  // LLaMA Pro (use_llama_pro): the trainable layers are the blocks its expansion inserted, every
  // (num_layers / trainable_layers)-th one, the last of each group (LLaMA-Factory's stride rule).
  bool llama_pro = false;
};

// Sets requires_grad on the trainable parameters only, marks the model partly frozen (so
// trainable_parameters(model, false) gives them, lora.h) and returns them in model order with HF
// names. ConfigError for a module name the model has not (listing those it has), or nothing to train.
std::vector<NamedParam> apply_freeze(CausalLM& model, const FreezeConfig& config);

}  // namespace lf::model
