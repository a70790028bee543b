#pragma once
// Building a CausalLM from a Hugging Face folder, and saving one so that
// transformers / vLLM load it (config.json, safetensors, tokenizer files).
//
// Random weights for benchmarks: the trainer's YAML key `init_weights: random`
// sets LoadOptions::random_init; then model_name_or_path may be a folder with only a
// config.json, or a config.json file itself (configs/models/*.json).
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "lf/model/causal_lm.h"
#include "lf/model/safetensors.h"
#include "lf/model/tensor_io.h"
#include "lf/quant/bnb_4bit.h"

namespace lf::model {

struct LoadOptions {
  c10::ScalarType param_dtype = c10::ScalarType::Float;
  c10::Device device = c10::Device(c10::DeviceType::CPU);
  bool random_init = false;
  uint64_t seed = 0;
  // QLoRA (bnb4_linear.h): the decoder linear layers quantized at load in bitsandbytes' 4-bit format.
  // The model is then built and read on the host and each linear quantized onto `device` in turn, so
  // the device never holds the dense base. A folder bitsandbytes saved in 4 bits (bnb4_checkpoint.h)
  // loads as it is, with or without this.
  std::optional<quant::Bnb4Spec> quantize;
};

// Errors (ConfigError): a path that is not local (with the download command to run),
// no config.json, unknown architecture, no weights without random_init, any missing,
// unexpected or mis-shaped tensor (named), a corrupt safetensors file.
std::unique_ptr<CausalLM> load_causal_lm(const std::string& model_name_or_path, const LoadOptions& options);

// Copies every parameter from its HF tensors in `ckpt` (the layout's ParamSpec::hf), converting
// dtype and device. Checks every name and shape before copying anything.
void load_weights(CausalLM& model, const SafetensorsCheckpoint& ckpt);

// A parameter's HF tensors (checked present, of their shapes) copied into `dst`: the one tensor,
// or each of n pieces into the k-th of dst viewed as [n, piece...] (experts held fused), or the
// whole tensor under the parameter's own name when the checkpoint holds that instead (reads_whole_from).
bool reads_whole_from(const ParamSpec& param, const SafetensorsCheckpoint& ckpt);
void read_hf_tensors(const ParamSpec& param, const SafetensorsCheckpoint& ckpt, at::Tensor& dst);
// The HF tensors a parameter is saved as: `fetch` gives its whole value (a collective under a
// sharded strategy), called once, when the writer reaches the first of them.
std::vector<LazyTensor> hf_lazy_tensors(const ParamSpec& param, c10::ScalarType dtype, std::function<at::Tensor()> fetch);

struct SaveOptions {
  uint64_t max_shard_bytes = 5'000'000'000ull;  // HF's default "5GB"
  std::optional<c10::ScalarType> dtype;         // default: the parameters' dtype
  std::filesystem::path copy_files_from;        // tokenizer + generation_config source
  // The value saved for each parameter (default: the parameter itself): a sharded strategy
  // gathers it here (a collective: every rank saves, in the same order).
  std::function<at::Tensor(const NamedParam&)> value_of;
  // false: write nothing, only fetch every value in order (ranks that take part in a
  // sharded strategy's gathers while rank 0 writes).
  bool write_files = true;
};

// Writes config.json, model.safetensors (or shards + index, metadata {"format":"pt"}) under the
// HF tensor names (the layout's),
// and copies tokenizer files and generation_config.json from copy_files_from.
void save_causal_lm(CausalLM& model, const std::filesystem::path& dir, const SaveOptions& options);

// Files copied from the source model folder on save (those that exist).
extern const char* const kModelSideFiles[];

}  // namespace lf::model
