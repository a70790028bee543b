#pragma once
// Every DeepSpeed config key lf-train knows, declared once with DeepSpeed's own
// default (deepspeed/runtime/zero/config.py, offload_config.py, runtime/constants.py)
// and what lf-train does with it. deepspeed_config.cpp checks a file against this
// table (an unknown key is an error with a did-you-mean) and reads the implemented
// keys; key_docs.cpp prints it. Internal to src/config.
#include <span>
#include <string_view>

namespace lf::config {

enum class DsPolicy {
  kImplemented,  // read into the plan's parallel section
  kMatchesYaml,  // "auto" takes the YAML's value (as HF fills it); an explicit value must equal it
  kNoEffect,     // a value other than DeepSpeed's default gets one warning line (per file)
  kRefused,      // a value other than `accepted` is a ConfigError with the reason
  kIgnored,      // DeepSpeed itself does not read it (LLaMA-Factory's files carry it): silent
};

enum class DsType { kBool, kNumber, kInt, kString, kObject, kList, kAny };

struct DsKey {
  std::string_view path;  // "zero_optimization.offload_optimizer.device"
  DsType type;
  DsPolicy policy;
  // DeepSpeed's default as JSON ("" : none, i.e. null). A no-effect key at its default is silent.
  std::string_view deepspeed_default;
  // kRefused: the JSON values accepted, "|"-separated ("" : DeepSpeed's default only).
  std::string_view accepted;
  std::string_view note;  // what lf-train does, why it has no effect, or why it is refused
  bool auto_ok = false;   // HF fills "auto" for it
  bool opaque = false;    // an object judged whole (its "enabled", else non-empty): contents unchecked
  bool fp16_only = false;  // matters only when fp16 is on (the loss scaler); inert otherwise
  // What shows that the key acts (tests/train/test_key_effects.py reads it from `lf-train keys
  // --json`): the observable kind of the YAML keys' (config_schema.h), a sample value (JSON) that
  // changes it, and what the run needs for it: `context`, a JSON object merged into the test's
  // DeepSpeed file, and `yaml_context`, "key: value" lines of the YAML.
  std::string_view observable = "";
  std::string_view sample = "";
  std::string_view context = "";
  std::string_view yaml_context = "";
};

std::span<const DsKey> deepspeed_keys();
const DsKey* find_deepspeed_key(std::string_view path);

}  // namespace lf::config
