#pragma once
// What a model is made of, from its config.json alone, as its family's spec declares it
// (src/model/model_spec.h: one file per family). Torch-free: lf-train's plan, doctor and
// preflight read it without weights; CausalLM builds its modules from the same layout and
// checks that they agree (causal_lm.cpp), so names, shapes and units are declared once.
//
// A decoder layer's composition (LayerSpec) is the family's choice of norm, attention and
// MLP. From it and the config, model_layout() derives every parameter (lf-train's name, shape,
// ZeRO unit, HF initialisation, the HF tensors it is read from and written to), the linear
// modules LoRA may adapt, the parameter count and the FLOPs per token.
#include <cstdint>
#include <string>
#include <vector>

#include "lf/model/config.h"

namespace lf::model {

// The norms of a decoder layer: RMSNorm over C in fp32, scaled by its weight (Llama: the normed
// value rounded to the activation dtype, then times w); Gemma's x̂ · (1 + w), all in fp32 and
// rounded once (its weights start at zero).
enum class NormKind { kRms, kRmsOnePlus };
// What a layer's queries attend over: every earlier position of their row (or of their packed
// sequence); or only the last `window` of those (Gemma 3's sliding layers).
enum class AttentionKind { kFullCausal, kSlidingWindow };
// A gated MLP's gate activation: SiLU (SwiGLU) or GELU's tanh approximation (Gemma's GeGLU).
enum class MlpActivation { kSilu, kGeluTanh };
// A layer's feed-forward block: SwiGLU, down(silu(gate(x)) * up(x)); or a router over experts
// (MoeSpec: top-k of softmax(gate(x)), each chosen expert a SwiGLU, their outputs weighted and
// summed, no token dropped), with an optional shared expert (Qwen2-MoE).
enum class MlpKind { kSwiGlu, kMoe };

// How a family's checkpoints name one expert's tensors (the Hub's and transformers 5's
// save_pretrained layout): "model.layers.N.<block>.experts.E.<gate>.weight".
struct ExpertNames {
  const char* block = "mlp";  // Mixtral: "block_sparse_moe"
  const char* gate = "gate_proj";
  const char* up = "up_proj";
  const char* down = "down_proj";
};

// MlpKind::kMoe. Experts are held fused (transformers 5's layout): gate_up_proj [E, 2I, C]
// (expert e's gate rows, then its up rows), down_proj [E, C, I]; the router gate.weight [E, C].
struct MoeSpec {
  int64_t experts = 0, top_k = 0, expert_intermediate = 0;
  bool norm_topk_prob = false;       // renormalise the k chosen probabilities to sum 1
  int64_t shared_intermediate = 0;   // Qwen2-MoE's shared expert (a SwiGLU every token passes); 0: none
  bool shared_gate = false;          // its output scaled by sigmoid(shared_expert_gate(x))
  int64_t index = 0;                 // this layer's place among the model's MoE layers (the aux loss)
  ExpertNames names;
};

struct AttentionSpec {
  AttentionKind kind = AttentionKind::kFullCausal;
  int64_t hidden = 0, heads = 0, kv_heads = 0, head_dim = 0;
  bool qkv_bias = false;  // q_proj, k_proj, v_proj
  bool o_bias = false;
  bool qk_norm = false;   // an RMSNorm over head_dim of every query and key head before RoPE (Qwen3)
  int64_t window = 0;     // kSlidingWindow: a query sees keys i - window < j <= i
  double scale = 0;       // the scores' scale; 0: 1 / sqrt(head_dim) (Gemma: query_pre_attn_scalar^-0.5)
  bool local_rope = false;  // RoPE from the config's local_rope (Gemma 3's sliding layers)
};

struct MlpSpec {
  MlpKind kind = MlpKind::kSwiGlu;
  int64_t hidden = 0, intermediate = 0;
  bool bias = false;
  MlpActivation activation = MlpActivation::kSilu;
  MoeSpec moe;  // kMoe only
};

// One pre-norm decoder layer: x + attention(norm(x)), then h + mlp(norm(h)). With sandwich norms
// (Gemma 2/3) the attention's and the MLP's outputs are normed too before their residual add:
// h = x + norm(attention(norm(x))), y = h + norm(mlp(norm(h))).
struct LayerSpec {
  NormKind norm = NormKind::kRms;
  double norm_eps = 1e-6;
  bool sandwich_norms = false;
  AttentionSpec attention;
  MlpSpec mlp;
};

// How init_random (HF's _init_weights) fills a parameter.
enum class ParamInit { kNormal, kZeros, kOnes };

// An HF checkpoint's tensor.
struct HfTensor {
  std::string name;  // "model.layers.3.mlp.experts.7.gate_proj.weight"
  std::vector<int64_t> shape;
};

// One of lf-train's parameters, in CausalLM::named_parameters' order.
struct ParamSpec {
  std::string name;   // lf-train's name ("model.layers.3.self_attn.q_proj.weight"): HF's for a 1:1 tensor
  std::string local;  // below its unit's module ("self_attn.q_proj.weight"; "embed_tokens.weight")
  std::vector<int64_t> shape;
  int64_t unit = 0;  // 0 the embedding, 1 + i decoder layer i, the head after the last layer
  ParamInit init = ParamInit::kNormal;
  // The HF tensors it is read from and written back to: one of its own shape, or n pieces of one
  // shape that fill it in order (the tensor viewed as [n, piece...]: experts held fused, each
  // expert's gate and up rows side by side in gate_up_proj; loader.h's read_hf_tensors).
  std::vector<HfTensor> hf;
  // A checkpoint may hold it whole instead, under `name` at `shape` (transformers 5's fused experts).
  bool reads_whole = false;
  double active = 1.0;  // the share of it one token's forward uses (an expert of E, top k: k / E)

  int64_t numel() const;
};

// A linear module LoRA may adapt (peft's target names match `module`).
struct LinearSpec {
  std::string module;      // "model.layers.3.self_attn.q_proj"
  std::string short_name;  // "q_proj": its last name part, as lora_target and adapter_config.json list it
  int64_t layer = 0;
  int64_t unit = 0;
  int64_t in = 0, out = 0;  // y [.., out] = x [.., in] W^T
  bool in_all = true;       // adapted by lora_target: all (LLaMA-Factory's find_all_linear_modules)
};

struct ModelLayout {
  std::vector<LayerSpec> layers;       // decoder layer i's composition
  NormKind final_norm = NormKind::kRms; // the head's norm: the layers' kind
  std::vector<std::string> unit_names; // "embedding", "layer 0", ..., "head"
  std::vector<ParamSpec> params;       // a tied lm_head is not listed (it is the embedding)
  std::vector<LinearSpec> linears;     // in model order
  std::vector<std::string> hf_ignored; // checkpoint tensors read as absent (a tied lm_head.weight)
  // PaLM's FLOPs of one token (for MFU): the parameters its forward uses, and 12·C per layer per
  // position it attends over.
  double params_per_token = 0;
  double attention_flops_per_token_position = 0;
  int64_t moe_layers = 0;  // layers whose MLP is a router over experts

  // Every parameter, and those one token's forward uses (experts: k of E).
  int64_t total_params() const;
  double active_params() const { return params_per_token; }

  int64_t head_unit() const { return static_cast<int64_t>(unit_names.size()) - 1; }
};

// The layout `config`'s family declares (config.spec, set by parse_model_config).
ModelLayout model_layout(const ModelConfig& config);

// peft's rule for a list of target names: a module is targeted when its full name is one of them
// or ends with "." + one of them ("q_proj", "self_attn.o_proj", "model.layers.3.mlp.down_proj").
bool lora_target_matches(const std::string& module, const std::string& target);
// lora_target as LLaMA-Factory gives it to peft: ["all"] (every linear of `in_all`), or names.
bool lora_targets(const LinearSpec& linear, const std::vector<std::string>& targets);

}  // namespace lf::model
