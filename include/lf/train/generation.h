#pragma once
// Batched generation from a CausalLM as transformers' generate runs it (num_beams 1): prompts left-padded
// with pad_id, positions counted from each row's first real token, a key/value cache (lf/model/kv_decode.h),
// the logits processors in HF's order (repetition penalty, then under sampling temperature, top-k, top-p) on
// fp32 logits, greedy argmax or torch.multinomial from `gen`, rows finished at any of eos_ids then padded
// with pad_id. The loop is the model's alone (no trainer state): predict uses it, and so can a stage that
// generates in its training loop (PPO). Inference only; one device; not thread-safe per model.
#include <ATen/core/Generator.h>

#include <cstdint>
#include <vector>

#include "lf/model/causal_lm.h"

namespace lf::train {

// LLaMA-Factory's GeneratingArguments (its defaults), with the stop and pad tokens its workflow adds.
struct GenerationConfig {
  bool do_sample = true;
  double temperature = 0.95;
  double top_p = 0.7;
  int64_t top_k = 50;
  int64_t max_new_tokens = 1024;
  double repetition_penalty = 1.0;
  std::vector<int32_t> eos_ids;  // generation stops at any of them
  int32_t pad_id = 0;
};

// For each prompt (token ids, non-empty), its generated tokens: as many as the batch ran (at most
// max_new_tokens), a finished row's tail padded with pad_id, the stop token kept (HF's generate output
// after the prompt). `gen`: the sampling generator (unused when greedy).
std::vector<std::vector<int32_t>> generate(const model::CausalLM& model, const std::vector<std::vector<int32_t>>& prompts,
                                           const GenerationConfig& config, at::Generator* gen = nullptr);

// The next-token scores after HF's logits processors for `config` ([B,V] fp32 in place: repetition
// penalty over `seen` [B,S] int64, then temperature, top-k, top-p when sampling).
void process_logits(at::Tensor& scores, const at::Tensor& seen, const GenerationConfig& config);

}  // namespace lf::train
