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
#include <optional>
#include <string>
#include <vector>

#include "lf/model/causal_lm.h"
#include "lf/model/oft.h"

namespace at {
class Generator;
}

namespace lf::model {

struct LoraConfig {
  int64_t rank = 8;
  double alpha = -1;    // <= 0: 2 * rank
  double dropout = 0.0;
  // "all" = every linear layer of the decoder (not lm_head), or names as peft matches them: a
  // module's full name or a suffix of it after a dot (q_proj, self_attn.o_proj,
  // model.layers.3.mlp.down_proj).
  std::vector<std::string> target = {"all"};
  bool use_rslora = false;  // scaling alpha / sqrt(r) instead of alpha / r (rank-stabilised LoRA)
  bool use_dora = false;    // weight-decomposed LoRA: a magnitude per output row (dora.h)
  // peft's modules_to_save (LLaMA-Factory's additional_target): modules trained fully, in fp32,
  // beside the adapters; a module matches when its name ends with one of these.
  std::vector<std::string> modules_to_save;
  uint64_t seed = 0;  // the run's `seed`: A is drawn as peft draws it after transformers.set_seed(seed)
  // PiSSA (pissa.h): A and B from the base weight's principal singular triplets, the base keeping the residual;
  // pissa_iter < 0: the full SVD ("pissa"), else torch.svd_lowrank with that many iterations ("pissa_niter_N").
  bool pissa = false;
  int64_t pissa_iter = 16;
  // Set: the adapter is peft's OFT (finetuning_type oft, oft.h) on the same targets and modules to save, not LoRA
  // (rank, alpha, dropout, rslora, DoRA and PiSSA then unused). LLaMA-Factory builds both through _setup_lora_tuning.
  std::optional<OftConfig> oft;

  // peft's init_lora_weights as adapter_config.json says it.
  std::string init_lora_weights() const {
    return !pissa ? "true" : pissa_iter < 0 ? "pissa" : "pissa_niter_" + std::to_string(pissa_iter);
  }

  double effective_alpha() const { return alpha > 0 ? alpha : 2.0 * static_cast<double>(rank); }
};

// Parses LLaMA-Factory's lora_target ("all" or "q_proj,v_proj").
std::vector<std::string> parse_lora_target(const std::string& text);

// Adds A ([r,in]) and B ([out,r], zero) in fp32 on the model's device to every targeted Linear,
// A drawn exactly as peft under LLaMA-Factory draws it from the same seed (lora.cpp), freezes the
// base parameters and returns the module short names targeted. ConfigError if a target names no module.
// `gen`: the CPU generator to draw from (null: a fresh one seeded with config.seed), shared when
// several adapters are built in turn as LLaMA-Factory does (prepare_lora).
std::vector<std::string> apply_lora(CausalLM& model, const LoraConfig& config, at::Generator* gen = nullptr);

// The LoRA parameters with PEFT's saved names, layer by layer (A, B, DoRA's magnitude), then the modules to save
// ("base_model.model.model.norm.weight", the base tensors themselves).
std::vector<NamedParam> lora_parameters(CausalLM& model);

// What training updates: the LoRA parameters when `lora`, else every base parameter (made to
// require grad) or, on a partly frozen model (freeze.h), those apply_freeze chose; in model order
// with HF / PEFT names.
std::vector<NamedParam> trainable_parameters(CausalLM& model, bool lora);

// adapter_model.safetensors (fp32 A/B, PEFT names) + adapter_config.json. value_of / write_files
// as in SaveOptions (loader.h): a sharded strategy's gathered values, every rank calling.
void save_lora_adapter(CausalLM& model, const LoraConfig& config, const std::filesystem::path& dir,
                       const std::string& base_model_name_or_path,
                       const std::function<at::Tensor(const NamedParam&)>& value_of = {}, bool write_files = true);

// The peft version whose adapter_config.json lf-train writes (the reference stack's,
// scripts/requirements-dev.txt): peft compares it with its own when loading.
inline constexpr const char* kPeftFormatVersion = "0.18.1";

// adapter_config.json as peft's LoraConfig.save_pretrained writes it under LLaMA-Factory: every
// field, peft's defaults where lf-train has no say, lora_alpha an integer when it is one.
// The JSON text (indent 2, sorted keys, no trailing newline).
std::string peft_adapter_config(const LoraConfig& config, const std::string& base_model_name_or_path,
                                const std::vector<std::string>& target_modules);

// Reads adapter_config.json, applies LoRA as it says, loads A/B (names checked).
// `gen` as in apply_lora: peft builds (and so draws) every adapter it loads before reading its weights.
LoraConfig load_lora_adapter(CausalLM& model, const std::filesystem::path& dir, at::Generator* gen = nullptr);

// peft's merge_and_unload of the adapter in `dir`: each targeted weight += (B A) x scaling in its own
// dtype, saved modules replace the base ones; the model carries no adapter afterwards.
void merge_lora_adapter(CausalLM& model, const std::filesystem::path& dir, at::Generator* gen = nullptr);

// LLaMA-Factory's _setup_lora_tuning for training: with `adapters` (adapter_name_or_path) every one
// is merged into the base in turn, except the last when !create_new_adapter, which is loaded and
// trained on (its own rank, alpha and targets); otherwise a new adapter from `config`. One CPU
// generator seeded with config.seed draws for all of them, in that order. Returns the trained
// adapter's config. `gen` (optional): that generator, which the caller keeps drawing from after (the
// reward model's value head: LLaMA-Factory creates it after peft's draws).
LoraConfig prepare_lora(CausalLM& model, const LoraConfig& config, const std::vector<std::filesystem::path>& adapters,
                        bool create_new_adapter, at::Generator* gen = nullptr);

}  // namespace lf::model
