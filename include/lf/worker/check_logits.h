#pragma once
// `lf-worker check-logits`: random weights from a config, saved as an HF folder in
// bf16, plus our logits (bf16 compute and fp32 compute over the same bf16 weights)
// on fixed random tokens, for scripts/bench/model_check_logits.py to compare with
// transformers loading the same folder.
#include <cstdint>
#include <string>

namespace lf::worker {

struct CheckLogitsOptions {
  std::string model_config;
  std::string out_dir;
  int64_t batch = 2;
  int64_t seq = 256;
  uint64_t seed = 0;
  std::string device = "auto";
};

// Writes out_dir/{config.json, model.safetensors, lf_logits.safetensors}; returns a
// JSON summary (sdpa backend, shapes).
std::string run_check_logits(const CheckLogitsOptions& options);

}  // namespace lf::worker
