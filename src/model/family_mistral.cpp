// Mistral (MistralForCausalLM): Llama's layer (no biases), head_dim from the config when given, and a
// sliding attention window. lf-train's attention is full causal: equal to Mistral's as long as no row
// is longer than the window, which the trainer checks against cutoff_len (run_training.cpp).
#include "model_spec.h"

namespace lf::model {
namespace {

void read_mistral(const nlohmann::json& j, ModelConfig& c, const std::string& source) {
  const int64_t window = json_or<int64_t>(j, "sliding_window", 0);
  LF_CHECK(window >= 0, ConfigError, "{}: sliding_window {} is negative", source, window);
  c.sliding_window = window;
}

}  // namespace

const ModelSpec kMistralSpec{"MistralForCausalLM", "mistral", read_mistral, llama_layer};

}  // namespace lf::model
