#pragma once
// Which parameters LLaMA-Factory 0.9.5's custom optimizers treat how (trainer_utils.py), by their HF names.
// Internal to lf_optim.
#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "lf/optim/optimizer.h"

namespace lf::optim {

// _get_decay_parameter_names: every parameter but biases decays. Its layer-norm exclusion names
// transformers' ALL_LAYERNORM_LAYERS, which is [nn.LayerNorm] alone, so the RMSNorm weights of every family
// lf-train trains decay (unlike HF's own AdamW groups, hf_decays).
bool lf_decays(const std::string& name);

// A weight of an nn.Linear: 2-D, not an embedding (embed_tokens is an nn.Embedding).
bool is_linear_weight(const NamedTensor& p);

// find_all_linear_modules: the last name component of every linear module but lm_head ("q_proj", ...).
std::vector<std::string> all_linear_modules(const std::vector<NamedTensor>& params);

// GaLore's / APOLLO's target parameters: the 2-D weights of linear modules whose module name contains
// one of `targets` ("all": all_linear_modules), in model order.
std::vector<bool> targeted_params(const std::vector<NamedTensor>& params, const std::vector<std::string>& targets);

}  // namespace lf::optim
