// Qwen2 (Qwen2ForCausalLM): Llama's layer with q/k/v biases (always; no o_proj bias). Its
// use_sliding_window / layer_types variants are refused: lf-train's attention is full causal.
#include "model_spec.h"

namespace lf::model {
namespace {

void read_qwen2(const nlohmann::json& j, ModelConfig& c, const std::string& source) {
  c.qkv_bias = true;
  refuse_sliding_layers(j, source);
}

}  // namespace

const ModelSpec kQwen2Spec{"Qwen2ForCausalLM", "qwen2", read_qwen2, llama_layer};

}  // namespace lf::model
