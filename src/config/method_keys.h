#pragma once
// The keys of LLaMA-Factory's training methods beyond plain LoRA / freeze / full (method_keys.cpp):
// PiSSA, LLaMA Pro, OFT and sft's token-weighted losses (issue 34). Internal to src/config.
#include <vector>

#include "config_schema.h"

namespace lf::config {

// The declarations config_schema.cpp lists.
std::vector<KeyDecl> pissa_and_llama_pro_keys();
std::vector<KeyDecl> sft_loss_keys();
std::vector<KeyDecl> oft_keys();

}  // namespace lf::config
