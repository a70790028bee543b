#include "lf/model/adapters_off.h"

#include "lf/model/causal_lm.h"
#include "lf/model/layers.h"

namespace lf::model {

AdaptersOff::AdaptersOff(CausalLM& model) {
  for (auto& ml : model.linears()) {
    if (ml.linear->lora_) held_.emplace_back(ml.linear, std::move(ml.linear->lora_));
    if (ml.linear->oft_) held_oft_.emplace_back(ml.linear, std::move(ml.linear->oft_));
  }
}

AdaptersOff::~AdaptersOff() {
  for (auto& [linear, lora] : held_) linear->lora_ = std::move(lora);
  for (auto& [linear, oft] : held_oft_) linear->oft_ = std::move(oft);
}

}  // namespace lf::model
