#include "model_spec.h"

namespace lf::model {
namespace {

// Every family lf-train runs: one line each, its spec defined in its own file.
const ModelSpec* const kFamilies[] = {&kLlamaSpec, &kQwen2Spec, &kQwen3Spec, &kMistralSpec,
                                      &kQwen3MoeSpec, &kQwen2MoeSpec, &kMixtralSpec, &kGemma3Spec};

// Families users ask for that lf-train refuses, with what it lacks (the README lists them).
struct Refused {
  const char* architecture;
  const char* model_type;
  const char* reason;
};
const Refused kRefused[] = {
    {"DeepseekV2ForCausalLM", "deepseek_v2",
     "DeepSeek's multi-head latent attention and its grouped, bias-corrected expert routing are not implemented"},
    {"DeepseekV3ForCausalLM", "deepseek_v3",
     "DeepSeek's multi-head latent attention and its sigmoid routing with score-correction bias are not implemented"},
    {"Glm4MoeForCausalLM", "glm4_moe", "GLM-4.5's sigmoid routing with score-correction bias is not implemented"},
    {"Qwen3NextForCausalLM", "qwen3_next", "Qwen3-Next's gated linear-attention (Gated DeltaNet) layers are not implemented"},
    {"Qwen3_5MoeForCausalLM", "qwen3_5_moe", "Qwen3.5's linear-attention layers are not implemented"},
    {"GptOssForCausalLM", "gpt_oss",
     "gpt-oss's attention sinks, expert biases and clamped SwiGLU are not implemented"},
    {"Llama4ForCausalLM", "llama4_text", "Llama 4's sigmoid top-1 routing and chunked attention are not implemented"},
    {"SwitchTransformersForConditionalGeneration", "switch_transformers",
     "expert capacity with token dropping (and encoder-decoder models) are not implemented"},
    {"JambaForCausalLM", "jamba", "Jamba's Mamba layers are not implemented"},
    {"Gemma2ForCausalLM", "gemma2", "Gemma 2's attention and final logit soft-capping are not implemented"},
    {"Gemma3ForConditionalGeneration", "gemma3",
     "Gemma 3's vision tower is not implemented (a text-only Gemma3ForCausalLM checkpoint trains)"},
    {"PhimoeForCausalLM", "phimoe", "PhiMoE's sparsemixer routing is not implemented"},
    {"DbrxForCausalLM", "dbrx", "DBRX's fused Wqkv attention with clipping is not implemented"},
};

}  // namespace

const ModelSpec* find_model_spec(const std::string& architecture, const std::string& model_type) {
  for (const auto* f : kFamilies)
    if (architecture == f->architecture || (architecture.empty() && model_type == f->model_type)) return f;
  return nullptr;
}

std::string refused_architecture_reason(const std::string& architecture, const std::string& model_type) {
  for (const auto& r : kRefused)
    if (architecture == r.architecture || (architecture.empty() && model_type == r.model_type)) return r.reason;
  return "";
}

std::string supported_architectures() {
  std::string s;
  for (const auto* f : kFamilies) s += (s.empty() ? "" : ", ") + std::string(f->architecture);
  return s;
}

const ModelSpec& model_spec(const ModelConfig& c) {
  LF_CHECK(c.spec, ConfigError, "model config '{}' has no family (build it with parse_model_config)",
           c.architecture_name);
  return *c.spec;
}

}  // namespace lf::model
