#pragma once
// The config keys lf-train knows, for people: `lf-train keys` (text) and the README's
// generated sections (Markdown: the implemented, accepted-values, refused and no-effect
// keys, and the DeepSpeed and FSDP keys). Both derive from the declarations only.
#include <string>

namespace lf::config {

std::string config_keys_markdown();
std::string config_keys_text();
// Every key as JSON for tests and scripts: name, policy, LLaMA-Factory's type and default, and for
// declared keys the plan field, a sample value and the observable (tests/train/test_key_effects.py).
std::string config_keys_json();

}  // namespace lf::config
