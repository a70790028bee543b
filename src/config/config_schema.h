#pragma once
// The config schema: every key lf-train treats specially is declared once, in
// config_schema.cpp, with its policy, the job plan field it sets (job_plan.h: one
// section per component, so the data section is DataArgs itself), its type, allowed
// values, its own check and a note for the README. The YAML reading
// (train_config.cpp), validation (config_rules.cpp) and the README's key lists
// (key_docs.cpp) all walk this table. A LLaMA-Factory key (llamafactory_keys.tsv says which exist) that
// is not declared here is accepted without effect. Internal to src/config.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "config_reader.h"
#include "lf/config/train_config.h"

namespace lf::config {

enum class KeyPolicy {
  kImplemented,  // read into a job plan field
  kOnlyValues,   // accepted with the listed values, which are what lf-train does anyway; others refused
  kRefused,      // a non-default value would change the result: ConfigError with the reason
  kNoEffect,     // accepted; a non-default value gets one warning line
};

struct KeyDecl {
  std::string name;
  KeyPolicy policy = KeyPolicy::kNoEffect;
  // implemented: what lf-train does with it; refused: why, and what to do instead;
  // no effect: why (optional).
  std::string note;
  bool own = false;         // lf-train's own key (not LLaMA-Factory's)
  std::string field;        // the plan field it sets: "section.member" ("" none)
  std::string type;         // for docs: "integer", "number", "bool", "text", "list", ...
  std::vector<std::string> choices;  // allowed values; empty: any of the type
  std::string choices_hint;          // appended to the refusal of another value
  // The default as the README shows it; empty: show(JobPlan{}).
  std::string default_text;
  // Why our default differs from LLaMA-Factory's (tests compare them otherwise).
  std::string default_differs;
  // A valid non-default value (tests: setting it must change `show`), and YAML lines it
  // needs beside it. Empty: derived from the type.
  std::string sample;
  std::string sample_context;
  // What a run shows when this key acts (implemented keys; tests/train/test_key_effects.py runs the
  // tiny job with the key at `sample` and requires the observable to change), taken from the
  // component that consumes the key, never from the plan itself:
  //   losses | lr | grad_norm | eval | log_entries | tokens | weights   trainer_log.jsonl / outputs
  //   file:GLOB          the paths of output_dir matching GLOB
  //   log:TEXT           the run's log lines containing TEXT
  //   predictions        a predict run's generated_predictions.jsonl
  //   refused            a CPU run stops with exit 2 naming the key (its GPU effect: a script
  //                      under scripts/device/ says which)
  //   outdir             the outputs land in the sample folder
  std::string observable;
  int ranks = 1;  // the ranks the observable needs (DDP / ZeRO keys: 2)

  std::function<void(const Reader&, JobPlan&)> read;         // YAML -> field
  std::function<void(const Reader&, const JobPlan&)> check;  // this key's own rule
  std::function<std::string(const JobPlan&)> show;          // the field as text
};

// The declared keys, in the order they are read (a later key may override an earlier one).
const std::vector<KeyDecl>& config_schema();
const KeyDecl* find_decl(std::string_view name);
// Declared policy, or kNoEffect for an undeclared LLaMA-Factory key.
KeyPolicy key_policy(std::string_view name);
// The default as text (default_text, else show of a default JobPlan; "" when neither).
std::string default_text(const KeyDecl& d);

// "`key: value` is not supported; lf-train supports a, b. hint" unless value is allowed.
void check_choice(const Reader& r, const std::string& key, const std::string& value,
                  const std::vector<std::string>& allowed, const std::string& hint);

}  // namespace lf::config
