#pragma once
// The numbers the memory model's terms are formed from (memory_model.cpp resolves them once
// from the plan, config.json and the world). Internal to lf_plan.
#include <cstdint>
#include <vector>

#include "lf/config/job_plan.h"
#include "lf/model/config.h"
#include "lf/plan/memory_model.h"
#include "lf/plan/model_units.h"
#include "lf/plan/zero_comm.h"
#include "quantized_base.h"

namespace lf::plan {

struct MemoryInputs {
  const config::JobPlan* plan = nullptr;
  const model::ModelConfig* mc = nullptr;
  double c = 2;                    // bytes of the compute dtype
  double rows = 0, tokens = 0;     // B x T, and the rows the LM head sees: B x (T - 1)
  int64_t row_len = 0, micro_batch = 0;
  double h = 0, q = 0, kv = 0, i = 0, v = 0, heads = 0;
  int64_t layers_bw = 0;           // decoder layers a gradient passes through
  double linear_params = 0;        // a decoder layer's linear weights (elements; experts and router included), on average
  // Bytes one token's MLP keeps for backward, and its MLP backward's working set (the largest), averaged
  // over the layers: a SwiGLU's 3 [I]; a mixture of experts' router and its k slots (layout_mlp_bytes).
  double mlp_saved = 0, mlp_backward = 0;
  double lora_linears = 0;         // adapted projections of one layer
  int64_t world = 1, stage = 0;
  int64_t expert_parallel = 1;     // expert_model_parallel_size: units and counts hold this rank's E / ep experts
  bool zero = false, ddp = false, offload = false;
  bool checkpointing = false, lean = false, fused = true, fused_ce = true;
  bool head_trains = false;
  bool fp32_weights = false;       // full / freeze: the model's weights are fp32 (LoRA: the compute dtype)
  bool reduce_buffers = false;     // ZeRO 2/3 over several ranks or offloaded: a unit's fp32 gradient
  std::vector<UnitParams> units;
  std::vector<bool> host_units;    // offload: the units whose state is on the host (offload_ratio)
  ParameterCounts counts;
  double largest_layer_unit = 0;   // elements (base + adapters)
  double head_unit_params = 0;     // the head unit's elements (+ the embedding's when tied: its weight)
  ZeroCommDepths comm;             // ZeRO: prefetch depth, reductions in flight (zero_comm.h)
  QuantizedBase quant;             // QLoRA: the decoder linears stored in 4 bits (quantized_base.h)
};

MemoryInputs memory_inputs(const config::JobPlan& plan, const model::ModelConfig& mc, const WorldLayout& world);

// Saved for backward by the decoder layers, and the weights' compute-dtype copies among them.
MemoryTerm saved_activations(const MemoryInputs& in);
// One layer's backward working set (recompute, gradients, ZeRO-3's gathered layers).
std::vector<MemoryTerm> layer_backward(const MemoryInputs& in);
// The LM head and its chunked loss: the larger of its forward and its backward.
std::vector<MemoryTerm> lm_head_loss(const MemoryInputs& in);

}  // namespace lf::plan
