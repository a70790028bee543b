#pragma once
// The reward model's value head (stage rm): TRL's AutoModelForCausalLMWithValueHead, which
// LLaMA-Factory's rm workflow wraps the model in. A Linear(hidden, 1) with bias, in fp32, on the final
// hidden states (transformers' hidden_states[-1]: after the final norm), behind a dropout of
// config.json's summary_dropout_prob (TRL's default 0.1 when the config has none):
//   value[b, t] = dropout(h[b, t]) . weight + bias          h [N,T,C] -> values [N,T] fp32
// Saved beside the adapter or model as value_head.safetensors ("v_head.summary.weight" [1,C],
// "v_head.summary.bias" [1]), as LLaMA-Factory's fix_valuehead_checkpoint writes it.
#include <ATen/core/Tensor.h>
#include <ATen/core/Generator.h>

#include <filesystem>
#include <vector>

#include "lf/model/layers.h"

namespace lf::model {

class CausalLM;

class ValueHead {
 public:
  // nn.Linear(hidden, 1)'s own init drawn from `gen` (torch's CPU generator where LLaMA-Factory's run
  // has it: after the LoRA draws), on the model's device.
  ValueHead(const CausalLM& model, at::Generator& gen, double dropout);

  at::Tensor forward(const at::Tensor& normed_hidden, bool training) const;  // [N,T,C] -> [N,T] fp32
  // "v_head.summary.weight" and "v_head.summary.bias", in the head's unit.
  std::vector<NamedParam> named_parameters();
  double dropout() const { return dropout_; }

  void save(const std::filesystem::path& file, const at::Tensor& weight, const at::Tensor& bias) const;

 private:
  at::Tensor weight_;  // [1, C] fp32
  at::Tensor bias_;    // [1] fp32
  double dropout_ = 0.1;
  int64_t unit_ = -1;
};

// TRL's summary_dropout_prob: config.json's, else 0.1.
double value_head_dropout(const std::filesystem::path& model_dir);

}  // namespace lf::model
