#pragma once
// The base model under a LoRA model, for the preference stages' reference (peft's disable_adapter(),
// which LLaMA-Factory's DPO and KTO trainers use when no ref_model is given): while an AdaptersOff
// lives, every Linear of the model runs without its LoRA (or DoRA) update or OFT rotation, and nothing is copied.
// The adapters' tensors stay where they are (a strategy's routes and shards are untouched).
// Not thread-safe: no forward of the model may run on another thread meanwhile.
#include <memory>
#include <vector>

namespace lf::model {

class CausalLM;
struct Linear;
struct LoraWeights;
struct OftWeights;

class AdaptersOff {
 public:
  explicit AdaptersOff(CausalLM& model);
  ~AdaptersOff();
  AdaptersOff(const AdaptersOff&) = delete;
  AdaptersOff& operator=(const AdaptersOff&) = delete;
  size_t count() const { return held_.size() + held_oft_.size(); }  // adapters switched off

 private:
  std::vector<std::pair<Linear*, std::unique_ptr<LoraWeights>>> held_;
  std::vector<std::pair<Linear*, std::unique_ptr<OftWeights>>> held_oft_;  // OFT's rotations (oft.h)
};

}  // namespace lf::model
