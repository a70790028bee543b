#pragma once
// Where a run's initial weights come from, decided once from the config's
// init_weights and what the model folder holds; lf-train decides it before the
// rendezvous (so a bad folder fails in milliseconds on every node) and lf-worker's
// loader acts on the same answer. Torch-free (lf_safetensors).
//
//   init_weights: auto (default)  the folder's safetensors when it has any; a folder
//                                 with config.json and no weight file at all (the tiny
//                                 demo model) starts from random weights, said in a line
//   init_weights: pretrained      the folder's safetensors; none is an error
//   init_weights: random          random weights (HF's init) from config.json; weights
//                                 in the folder are ignored, said in a line
// A half-downloaded folder (an index whose shards are missing, huggingface-cli's
// .incomplete files, only *.bin weights) is an error under auto and pretrained.
#include <cstdint>
#include <filesystem>
#include <string>

namespace lf::model {

struct InitialWeights {
  bool random = false;
  std::string note;  // one line for the user (weights ignored, none found); empty: nothing to say
};

// Throws ConfigError (what was found, what to do) when the folder cannot give what
// init_weights asks for. Validates the safetensors headers and sizes it would load
// (a truncated file fails here), without reading the tensor data.
InitialWeights choose_initial_weights(const std::filesystem::path& model_path, const std::string& init_weights,
                                      int64_t seed);

}  // namespace lf::model
