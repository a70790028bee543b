#pragma once
// A model folder bitsandbytes saved in its 4-bit format (transformers' save_pretrained of a model
// loaded with load_in_4bit): config.json's quantization_config says so, and each decoder linear's
// weight is stored as bitsandbytes' Params4bit + QuantState (weight, weight.absmax, weight.quant_map,
// weight.nested_absmax, weight.nested_quant_map, weight.quant_state.bitsandbytes__nf4|fp4: a JSON
// with the shape, blocksize, dtype and nested_offset). Loaded as it is (no re-quantization).
#include <c10/core/Device.h>

#include <filesystem>
#include <optional>

#include "lf/model/safetensors.h"
#include "lf/quant/bnb_4bit.h"

namespace lf::model {

class CausalLM;

// The folder's bitsandbytes 4-bit settings from config.json's quantization_config; nullopt when it
// has none. ConfigError for a quantization lf-train does not read (8-bit LLM.int8(), GPTQ, AWQ, ...),
// with the reason.
std::optional<quant::Bnb4Spec> saved_bnb4_spec(const std::filesystem::path& config_json);

// Reads every parameter of `model` (built on the host) from the bitsandbytes folder: the decoder
// linear layers' 4-bit storage onto `device` as their format (bnb4_linear.h), the rest as
// load_weights does. Names, shapes and each linear's quant state are checked first (ConfigError
// naming the tensor).
void load_bnb4_weights(CausalLM& model, const SafetensorsCheckpoint& ckpt, const c10::Device& device);

}  // namespace lf::model
