#pragma once
// What a model is made of, counted from its config.json alone (no weights, no torch): the
// linear layers of a decoder layer with their shapes, and the parameters of each ZeRO unit (the
// embedding, each decoder layer, the head: model/unit_hooks.h's units), trainable or frozen under
// the plan's adapter section. The one place these counts are formed for the plan, the memory
// model (memory_model.h), doctor, the preflight and `lf-train plan`, from the family's layout
// (lf/model/model_layout.h: the same one CausalLM is built from).
#include <cstdint>
#include <string>
#include <vector>

#include "lf/config/job_plan.h"
#include "lf/model/config.h"

namespace lf::model {
struct ParamSpec;  // lf/model/model_layout.h
}

namespace lf::plan {

// A decoder layer's linear layer: y [.., out] = x [.., in] W^T, by the name lora_target uses.
struct LinearShape {
  std::string name;  // q_proj k_proj v_proj o_proj gate_proj up_proj down_proj
  int64_t in = 0, out = 0;
};
// Those of the first decoder layer (every family here has one kind of layer).
std::vector<LinearShape> decoder_linears(const model::ModelConfig& mc);

// One unit's parameters (elements). LoRA's adapters belong to the layer they adapt.
struct UnitParams {
  std::string name;  // "embedding", "layer 0", ..., "head"
  int64_t params = 0;     // the unit's base parameters
  int64_t trainable = 0;  // trained (LoRA: the adapters and modules_to_save; freeze: the chosen ones)
  int64_t frozen = 0;     // base parameters not trained
};

// Units in forward order: 0 the embedding, 1..L the decoder layers, L+1 the head (the final
// norm, and lm_head when not tied to the embedding: tied, the head unit holds the norm only).
// `expert_parallel` (expert_model_parallel_size): what one rank holds when each sparse layer's
// experts are placed over that many ranks (parallel/expert_parallel_strategy.cpp): E / ep of the
// fused experts.gate_up_proj [E, 2I, C] and experts.down_proj [E, C, I]; the router, a shared
// expert and every other parameter whole. 1: the whole model.
std::vector<UnitParams> unit_parameters(const model::ModelConfig& mc, const config::AdapterSection& a,
                                        int64_t expert_parallel = 1);

struct ParameterCounts {
  int64_t total = 0;      // base parameters (num_parameters)
  int64_t trainable = 0;  // adapters included
  int64_t frozen = 0;
  int64_t lora = 0;       // of trainable: the LoRA adapters (A and B) alone
};
// Over unit_parameters' units: the whole model, or one rank's share under expert parallelism.
ParameterCounts parameter_counts(const model::ModelConfig& mc, const config::AdapterSection& a,
                                 int64_t expert_parallel = 1);

// Elements of `p` one rank holds when the experts are placed over `expert_parallel` ranks: the
// fused expert tensors' E / ep slice of dim 0, anything else whole.
int64_t rank_numel(const model::ParamSpec& p, int64_t expert_parallel);

// The projections LoRA adapts in a decoder layer (lora_target, as peft matches it in any layer;
// none unless LoRA).
std::vector<LinearShape> lora_linears(const model::ModelConfig& mc, const config::AdapterSection& a);

// The LoRA adapters' parameters of one decoder layer: rank x (in + out) for each targeted linear.
int64_t lora_params_per_layer(const model::ModelConfig& mc, const config::AdapterSection& a);

// How many decoder layers keep activations for backward: every layer a gradient passes through
// (all of them under full and LoRA; under freeze, from the first trainable layer up).
int64_t layers_in_backward(const model::ModelConfig& mc, const config::AdapterSection& a);

// Whether lm_head's weight is trained (full; freeze with lm_head, or embed_tokens when tied, among
// its extra modules; LoRA with it in additional_target).
bool head_trainable(const model::ModelConfig& mc, const config::AdapterSection& a);

}  // namespace lf::plan
