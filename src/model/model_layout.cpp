// The layout of a model from its family's spec: the tensors of each kind of block (norm,
// attention, MLP) in CausalLM::named_parameters' order, below HF's module names
// ("model.embed_tokens", "model.layers.N.", "model.norm", "lm_head").
#include "lf/model/model_layout.h"

#include <fmt/format.h>

#include "model_spec.h"

namespace lf::model {
namespace {

// One unit's tensors and linear modules as they are declared.
struct UnitBuilder {
  ModelLayout& out;
  int64_t unit;
  std::string prefix;  // "model.layers.3."
  int64_t layer = -1;  // decoder layers only

  ParamSpec& tensor(const std::string& local, std::vector<int64_t> shape, ParamInit init) {
    ParamSpec p;
    p.name = prefix + local;
    p.local = local;
    p.shape = shape;
    p.unit = unit;
    p.init = init;
    p.hf = {{prefix + local, shape}};
    out.params.push_back(std::move(p));
    return out.params.back();
  }
  // weight [out, in] (HF's init: normal), bias [out] (zeros).
  void linear(const std::string& path, int64_t in, int64_t out_features, bool bias) {
    tensor(path + ".weight", {out_features, in}, ParamInit::kNormal);
    if (bias) tensor(path + ".bias", {out_features}, ParamInit::kZeros);
    out.linears.push_back({prefix + path, path.substr(path.rfind('.') + 1), layer, unit, in, out_features, true});
  }
  void norm(const std::string& path, NormKind kind, int64_t size) {
    switch (kind) {
      case NormKind::kRms: tensor(path + ".weight", {size}, ParamInit::kOnes); return;
      case NormKind::kRmsOnePlus: tensor(path + ".weight", {size}, ParamInit::kZeros); return;  // 1 + 0
    }
  }
};

void attention_tensors(UnitBuilder& u, const AttentionSpec& a, NormKind norm) {
  const int64_t q = a.heads * a.head_dim, kv = a.kv_heads * a.head_dim;
  u.linear("self_attn.q_proj", a.hidden, q, a.qkv_bias);
  u.linear("self_attn.k_proj", a.hidden, kv, a.qkv_bias);
  u.linear("self_attn.v_proj", a.hidden, kv, a.qkv_bias);
  u.linear("self_attn.o_proj", q, a.hidden, a.o_bias);
  if (a.qk_norm) {
    u.norm("self_attn.q_norm", norm, a.head_dim);
    u.norm("self_attn.k_norm", norm, a.head_dim);
  }
}

// A router over experts (MoeSpec): the router's weight, the experts fused (each read from and
// written to the checkpoint's per-expert tensors, or read whole from transformers 5's fused ones),
// then the shared expert and its gate (Qwen2-MoE), whose linears LoRA may adapt as peft does.
void moe_tensors(UnitBuilder& u, const MlpSpec& m) {
  const auto& e = m.moe;
  const std::string hf = u.prefix + e.names.block + ".";
  u.tensor("mlp.gate.weight", {e.experts, m.hidden}, ParamInit::kNormal).hf = {{hf + "gate.weight", {e.experts, m.hidden}}};
  // Each expert's pieces in the order they fill the fused tensor (gate_up_proj: its gate rows, then its up rows).
  std::vector<HfTensor> gate_up, down;
  for (int64_t k = 0; k < e.experts; ++k) {
    const std::string expert = fmt::format("{}experts.{}.", hf, k);
    gate_up.push_back({expert + e.names.gate + ".weight", {e.expert_intermediate, m.hidden}});
    gate_up.push_back({expert + e.names.up + ".weight", {e.expert_intermediate, m.hidden}});
    down.push_back({expert + e.names.down + ".weight", {m.hidden, e.expert_intermediate}});
  }
  const double active = static_cast<double>(e.top_k) / static_cast<double>(e.experts);
  const auto experts = [&](const char* local, std::vector<int64_t> shape, std::vector<HfTensor> pieces) {
    auto& p = u.tensor(local, std::move(shape), ParamInit::kNormal);
    p.hf = std::move(pieces);
    p.reads_whole = true;
    p.active = active;
  };
  experts("mlp.experts.gate_up_proj", {e.experts, 2 * e.expert_intermediate, m.hidden}, std::move(gate_up));
  experts("mlp.experts.down_proj", {e.experts, m.hidden, e.expert_intermediate}, std::move(down));
  if (e.shared_intermediate > 0) {
    u.linear("mlp.shared_expert.gate_proj", m.hidden, e.shared_intermediate, false);
    u.linear("mlp.shared_expert.up_proj", m.hidden, e.shared_intermediate, false);
    u.linear("mlp.shared_expert.down_proj", e.shared_intermediate, m.hidden, false);
  }
  if (e.shared_gate) u.linear("mlp.shared_expert_gate", m.hidden, 1, false);
}

void mlp_tensors(UnitBuilder& u, const MlpSpec& m) {
  switch (m.kind) {
    case MlpKind::kSwiGlu:
      u.linear("mlp.gate_proj", m.hidden, m.intermediate, m.bias);
      u.linear("mlp.up_proj", m.hidden, m.intermediate, m.bias);
      u.linear("mlp.down_proj", m.intermediate, m.hidden, m.bias);
      return;
    case MlpKind::kMoe: moe_tensors(u, m); return;
  }
}

// Attention's FLOPs per token per position attended over: QK^T and PV, forward and backward (PaLM's
// 12·L·C, counted with the hidden size).
double attention_flops_per_position(const AttentionSpec& a) {
  switch (a.kind) {
    case AttentionKind::kFullCausal:
    case AttentionKind::kSlidingWindow: return 12.0 * static_cast<double>(a.hidden);  // no window discount (PaLM)
  }
  return 0;
}

void layer_tensors(ModelLayout& out, int64_t index, const LayerSpec& l) {
  UnitBuilder u{out, 1 + index, fmt::format("model.layers.{}.", index), index};
  u.norm("input_layernorm", l.norm, l.attention.hidden);
  attention_tensors(u, l.attention, l.norm);
  mlp_tensors(u, l.mlp);
  if (l.sandwich_norms) {  // Gemma: post_attention_layernorm norms the attention's output
    u.norm("post_attention_layernorm", l.norm, l.attention.hidden);
    u.norm("pre_feedforward_layernorm", l.norm, l.mlp.hidden);
    u.norm("post_feedforward_layernorm", l.norm, l.mlp.hidden);
  } else {
    u.norm("post_attention_layernorm", l.norm, l.mlp.hidden);
  }
  out.attention_flops_per_token_position += attention_flops_per_position(l.attention);
  out.moe_layers += l.mlp.kind == MlpKind::kMoe;
}

}  // namespace

int64_t ParamSpec::numel() const {
  int64_t n = 1;
  for (const auto d : shape) n *= d;
  return n;
}

ModelLayout model_layout(const ModelConfig& c) {
  const auto& spec = model_spec(c);
  ModelLayout out;
  out.unit_names.push_back("embedding");
  UnitBuilder embedding{out, 0, "model."};
  embedding.tensor("embed_tokens.weight", {c.vocab_size, c.hidden_size}, ParamInit::kNormal);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    out.layers.push_back(spec.layer(c, i));
    out.unit_names.push_back(fmt::format("layer {}", i));
    layer_tensors(out, i, out.layers.back());
  }
  out.unit_names.push_back("head");
  // The final norm is of the layers' kind; lm_head sits outside "model.".
  if (!out.layers.empty()) out.final_norm = out.layers.back().norm;
  UnitBuilder norm{out, c.num_layers + 1, "model."}, lm_head{out, c.num_layers + 1, ""};
  norm.norm("norm", out.final_norm, c.hidden_size);
  if (c.tie_word_embeddings) out.hf_ignored.push_back("lm_head.weight");  // HF ignores it too
  else lm_head.tensor("lm_head.weight", {c.vocab_size, c.hidden_size}, ParamInit::kNormal);
  for (const auto& p : out.params) out.params_per_token += static_cast<double>(p.numel()) * p.active;
  return out;
}

int64_t ModelLayout::total_params() const {
  int64_t n = 0;
  for (const auto& p : params) n += p.numel();
  return n;
}

int64_t num_parameters(const ModelConfig& c) { return model_layout(c).total_params(); }

bool lora_target_matches(const std::string& full, const std::string& t) {
  return full == t || (full.size() > t.size() && full.ends_with(t) && full[full.size() - t.size() - 1] == '.');
}

bool lora_targets(const LinearSpec& linear, const std::vector<std::string>& targets) {
  if (targets.size() == 1 && targets[0] == "all") return linear.in_all;
  for (const auto& t : targets)
    if (lora_target_matches(linear.module, t)) return true;
  return false;
}

}  // namespace lf::model
