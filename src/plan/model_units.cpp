#include "lf/plan/model_units.h"

#include <algorithm>

#include "lf/model/model_layout.h"
#include "lf/model/oft_shape.h"

namespace lf::plan {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

bool listed(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// One adapter's A [r, in] and B [out, r] (+ DoRA's magnitude [out]); OFT's oft_R [in / b, b(b-1)/2].
int64_t lora_params(const config::AdapterSection& a, int64_t in, int64_t out) {
  if (a.oft()) return model::oft_params(a.oft_rank, a.oft_block_size, in);
  return a.lora_rank * (in + out) + (a.use_dora ? out : 0);
}

// freeze: the layer ids trained (LLaMA-Factory's _setup_freeze_tuning: the last N, or the first -N).
bool freeze_trains_layer(const config::AdapterSection& a, int64_t layer, int64_t layers) {
  const int64_t n = a.freeze_trainable_layers;
  return n > 0 ? layer >= layers - n : layer < -n;
}

bool freeze_trains(const config::AdapterSection& a, const std::string& full_name, bool in_trained_layer) {
  for (const auto& extra : a.freeze_extra_modules)
    if (contains(full_name, extra)) return true;
  if (!in_trained_layer) return false;
  for (const auto& m : a.freeze_trainable_modules)
    if (m == "all" || contains(full_name, "." + m + ".")) return true;
  return false;
}

// The tensors expert parallelism places per rank: exactly the two MoeBlock slots the strategy
// slices (expert_parallel_strategy.cpp: keep_my_experts on gate_up_ and down_, named
// "experts.gate_up_proj" / "experts.down_proj" below the layer's mlp; the layout declares them under
// the same local names for every family, Mixtral's HF "block_sparse_moe" included).
bool placed_per_rank(const model::ParamSpec& p) {
  return p.local == "mlp.experts.gate_up_proj" || p.local == "mlp.experts.down_proj";
}

}  // namespace

std::vector<LinearShape> decoder_linears(const model::ModelConfig& mc) {
  std::vector<LinearShape> out;
  for (const auto& l : model::model_layout(mc).linears)
    if (l.layer == 0) out.push_back({l.short_name, l.in, l.out});
  return out;
}

// By short name, those lora_target adapts in any layer.
std::vector<LinearShape> lora_linears(const model::ModelConfig& mc, const config::AdapterSection& a) {
  std::vector<LinearShape> out;
  if (!a.peft()) return out;
  const auto layout = model::model_layout(mc);
  for (const auto& l : decoder_linears(mc))
    for (const auto& m : layout.linears)
      if (m.short_name == l.name && model::lora_targets(m, a.lora_target)) {
        out.push_back(l);
        break;
      }
  return out;
}

int64_t lora_params_per_layer(const model::ModelConfig& mc, const config::AdapterSection& a) {
  int64_t n = 0;
  for (const auto& l : lora_linears(mc, a)) n += lora_params(a, l.in, l.out);
  return n;
}

int64_t rank_numel(const model::ParamSpec& p, int64_t expert_parallel) {
  if (expert_parallel <= 1 || !placed_per_rank(p) || p.shape.empty()) return p.numel();
  return p.numel() / p.shape[0] * (p.shape[0] / expert_parallel);  // [E/ep, ...] of [E, ...]
}

std::vector<UnitParams> unit_parameters(const model::ModelConfig& mc, const config::AdapterSection& a,
                                        int64_t expert_parallel) {
  const auto layout = model::model_layout(mc);
  const int64_t layers = mc.num_layers;
  std::vector<UnitParams> out;
  for (const auto& name : layout.unit_names) out.push_back({name});
  for (const auto& p : layout.params) {
    auto& u = out[static_cast<size_t>(p.unit)];
    const bool trained_layer = p.unit >= 1 && p.unit <= layers && freeze_trains_layer(a, p.unit - 1, layers);
    const int64_t n = rank_numel(p, expert_parallel);
    u.params += n;
    if (a.peft())  // modules_to_save: a trained copy beside the frozen original (peft)
      for (const auto& module : a.additional_target)
        if (contains(p.name, module)) u.trainable += n;
    if (a.full() || (a.freeze() && freeze_trains(a, p.name, trained_layer))) u.trainable += n;
    else u.frozen += n;
  }
  if (a.peft())  // the adapters belong to the layer they adapt
    for (const auto& l : layout.linears)
      if (model::lora_targets(l, a.lora_target)) out[static_cast<size_t>(l.unit)].trainable += lora_params(a, l.in, l.out);
  return out;
}

ParameterCounts parameter_counts(const model::ModelConfig& mc, const config::AdapterSection& a,
                                 int64_t expert_parallel) {
  ParameterCounts c;
  for (const auto& u : unit_parameters(mc, a, expert_parallel)) {
    c.total += u.params;
    c.trainable += u.trainable;
    c.frozen += u.frozen;
  }
  if (a.peft())
    for (const auto& l : model::model_layout(mc).linears)
      if (model::lora_targets(l, a.lora_target)) c.lora += lora_params(a, l.in, l.out);
  return c;
}

int64_t layers_in_backward(const model::ModelConfig& mc, const config::AdapterSection& a) {
  if (!a.freeze()) return mc.num_layers;
  for (const auto& e : a.freeze_extra_modules)
    if (e == "embed_tokens") return mc.num_layers;  // the gradient reaches the embedding through every layer
  const int64_t n = a.freeze_trainable_layers;
  return n > 0 ? std::min(n, mc.num_layers) : mc.num_layers;  // the first -N: backward runs through all above
}

bool head_trainable(const model::ModelConfig& mc, const config::AdapterSection& a) {
  if (a.full()) return true;
  const char* head = mc.tie_word_embeddings ? "embed_tokens" : "lm_head";
  if (a.freeze()) return listed(a.freeze_extra_modules, head);
  return listed(a.additional_target, head);
}

}  // namespace lf::plan
