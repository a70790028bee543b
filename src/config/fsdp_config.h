#pragma once
// HF's `fsdp:` options and `fsdp_config:` (a mapping or a JSON file) read with
// TrainingArguments' semantics: full_shard = ZeRO stage 3, shard_grad_op = stage 2,
// offload = parameters and optimizer on the CPU; hybrid sharding is refused; the wrap
// policy is accepted and unused (lf-train wraps its own decoder layers). Every
// fsdp_config key is declared (fsdp_keys()). Internal to src/config.
#include <nlohmann/json.hpp>

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config_reader.h"

namespace lf::config {

enum class FsdpPolicy { kImplemented, kNoEffect, kRefused, kWrap };

struct FsdpKey {
  std::string_view name;  // as HF spells it after dropping the "fsdp_" prefix
  FsdpPolicy policy;
  std::string_view hf_default;  // JSON
  std::string_view note;
  // What shows that the key acts (tests/train/test_key_effects.py, through `lf-train keys
  // --json`): the observable kind (config_schema.h), a sample value (JSON; an option's is its
  // name) and the YAML lines the run needs ("fsdp: auto_wrap": full_shard by default).
  std::string_view observable = "";
  std::string_view sample = "";
  std::string_view yaml_context = "";
};

std::span<const FsdpKey> fsdp_keys();
// The `fsdp:` options HF accepts, each with what lf-train does with it.
std::span<const FsdpKey> fsdp_options();

struct FsdpSettings {
  std::string label;  // "fsdp: full_shard auto_wrap"
  int64_t stage = 3;
  std::string offload = "none";  // none | params
  nlohmann::json config;         // fsdp_config as read (for the cross-node config check)
};

// nullopt when `fsdp` is unset, empty or false (then a set fsdp_config gets a warning:
// HF uses it only with fsdp). Throws one ConfigError listing every problem.
std::optional<FsdpSettings> read_fsdp(const Reader& r, const std::string& config_dir,
                                      std::vector<std::string>& warnings, std::vector<std::string>& notes);

}  // namespace lf::config
