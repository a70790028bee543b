// The config schema's promises: every implemented key is read (setting it changes its
// field), every data key reaches DataArgs, our defaults are LLaMA-Factory's unless the
// schema says why not, and each declared key exists.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "config_schema.h"
#include "key_table.h"
#include "lf/common/error.h"
#include "lf/config/train_config.h"

using namespace lf::config;

namespace {

const std::string kMinimal = "model_name_or_path: models/tiny\ndataset: alpaca_en_demo\n";

// Keys whose sample must name a file (the schema cannot).
const std::map<std::string, std::string> kFileSamples = {
    {"deepspeed", std::string(LF_CONFIG_FIXTURES) + "/ds_z2_config.json"},
};

std::string sample_of(const KeyDecl& d) {
  auto it = kFileSamples.find(d.name);
  return it != kFileSamples.end() ? it->second : d.sample;
}

LoadedConfig parse(const std::string& extra) { return parse_train_config(kMinimal + extra, {}, "cfg.yaml"); }

std::string context_of(const KeyDecl& d) { return d.sample_context.empty() ? "" : d.sample_context + "\n"; }

}  // namespace

// A key marked implemented that nothing reads fails here: its field keeps the default.
TEST(Schema, EveryImplementedKeyChangesItsField) {
  int checked = 0;
  for (const KeyDecl& d : config_schema()) {
    if (d.policy != KeyPolicy::kImplemented) continue;
    // do_train's other value (false) needs do_predict, which makes an unset do_train false itself (HF's default):
    // no context lets the sample alone change it (tests/config/predict_keys_test.cpp covers it).
    if (d.name == "do_train") continue;
    // fp8_recipe needs fp8: true, whose observable on this CPU is the worker's refusal, so its schema sample
    // carries no context (the key-effect run); Config.Fp8KeysAndTheirRules sees it set the plan's field.
    if (d.name == "fp8_recipe") continue;
    ASSERT_TRUE(d.show) << d.name << " is implemented but names no field";
    EXPECT_FALSE(d.field.empty()) << d.name;
    const std::string sample = sample_of(d);
    if (sample.empty()) {
      // Only a key with a single allowed value (stage: sft) has no other value to set.
      EXPECT_EQ(d.choices.size(), 1u) << d.name << " has no sample value: give it .sample(...)";
      continue;
    }
    const std::string base = d.show(parse(context_of(d)).plan);
    LoadedConfig set;
    try {
      set = parse_train_config(kMinimal + context_of(d), {d.name + "=" + sample}, "cfg.yaml");
    } catch (const lf::ConfigError& e) {
      ADD_FAILURE() << d.name << ": " << sample << " is refused: " << e.what();
      continue;
    }
    EXPECT_NE(d.show(set.plan), base) << d.name << ": " << sample << " left `" << d.field << "` at " << base;
    ++checked;
  }
  EXPECT_GT(checked, 55);
}

// The data pipeline takes the plan's data section alone: what it needs of other sections is
// derived into it once, by the builder (no second DataArgs builder exists to forget a key).
TEST(Schema, TheDataSectionCarriesWhatThePipelineNeeds) {
  auto c = parse("eval_dataset: a,b\ndataset_dir: d\ntemplate: qwen\ncutoff_len: 77\ntrain_on_prompt: true\n"
                 "mask_history: true\npacking: true\nmax_samples: 5\ntokenized_path: tok\nmix_strategy: interleave_over\n"
                 "interleave_probs: 0.5\ndefault_system: hi\ntool_format: glm4\nenable_thinking: false\n"
                 "preserve_thinking: true\npreprocessing_batch_size: 10\npreprocessing_num_workers: 3\nseed: 7\n"
                 "neat_packing: true\n")
               .plan;
  const lf::DataArgs& a = c.data;
  EXPECT_TRUE(a.neat_packing);
  EXPECT_EQ(a.dataset, std::vector<std::string>{"alpaca_en_demo"});
  EXPECT_EQ(a.eval_dataset, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(a.dataset_dir, "d");
  EXPECT_EQ(a.template_name, "qwen");
  EXPECT_EQ(a.cutoff_len, 76);  // packing: LLaMA-Factory packs into cutoff_len - 1 tokens (Config.PackingCutoff)
  EXPECT_TRUE(a.train_on_prompt && a.mask_history && a.packing && a.preserve_thinking);
  EXPECT_FALSE(a.enable_thinking);
  EXPECT_EQ(a.max_samples.value(), 5);
  EXPECT_EQ(a.tokenized_path, "tok");
  EXPECT_EQ(a.mix_strategy, "interleave_over");
  EXPECT_EQ(a.interleave_probs, std::vector<double>{0.5});
  EXPECT_EQ(a.default_system.value(), "hi");
  EXPECT_EQ(a.tool_format.value(), "glm4");
  EXPECT_EQ(a.preprocessing_batch_size, 10);
  EXPECT_EQ(a.preprocessing_num_workers, 3);
  EXPECT_EQ(a.model_name_or_path, "models/tiny");
  EXPECT_EQ(a.stage, "sft");
  EXPECT_EQ(a.seed, 7u);
  EXPECT_EQ(a.base_dir, ".");
}

// Our field defaults are LLaMA-Factory's (the generated table), except where the schema says why.
TEST(Schema, DefaultsAreLlamaFactorysUnlessDeclaredOtherwise) {
  const JobPlan defaults;
  for (const KeyDecl& d : config_schema()) {
    if (d.policy != KeyPolicy::kImplemented || d.own || d.field == "parallel.zero_stage") continue;
    const KeySpec* spec = find_key(d.name);
    ASSERT_NE(spec, nullptr) << d.name;
    const bool same = equals_python_default(d.show(defaults), spec->default_repr);
    if (d.default_differs.empty())
      EXPECT_TRUE(same) << d.name << ": ours " << d.show(defaults) << ", LLaMA-Factory's " << spec->default_repr;
    else
      EXPECT_FALSE(same) << d.name << " says its default differs (" << d.default_differs << ") but it does not";
  }
}

TEST(Schema, DeclaredKeysExistOnceAndSayWhy) {
  std::set<std::string> seen;
  for (const KeyDecl& d : config_schema()) {
    EXPECT_TRUE(seen.insert(d.name).second) << d.name << " is declared twice";
    const KeySpec* spec = find_key(d.name);
    EXPECT_NE(spec, nullptr) << d.name << " is not a LLaMA-Factory key (nor lf-train's own)";
    if (spec) EXPECT_EQ(spec->dataclass == "lf-train", d.own) << d.name;
    if (d.policy == KeyPolicy::kRefused || d.policy == KeyPolicy::kOnlyValues)
      EXPECT_FALSE(d.note.empty()) << d.name << " is refused without a reason";
  }
}

// `stage` has one rule, in one place: the schema's allowed values.
TEST(Schema, StageIsValidatedByItsDeclaration) {
  const KeyDecl* stage = find_decl("stage");
  ASSERT_NE(stage, nullptr);
  EXPECT_EQ(stage->choices, (std::vector<std::string>{"sft", "pt", "dpo", "kto", "rm"}));
  EXPECT_EQ(stage->policy, KeyPolicy::kImplemented);
  try {
    parse("stage: ppo\n");
    FAIL();
  } catch (const lf::ConfigError& e) {
    const std::string want = "cfg.yaml:3: `stage: ppo` is not supported; lf-train supports sft, pt, dpo, kto, rm. ppo";
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

TEST(Schema, EvaluationAndValidationSetsAreExclusiveAsInLlamaFactory) {
  try {
    parse("val_size: 0.1\neval_dataset: other\n");
    FAIL();
  } catch (const lf::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("`val_size: 0.1` and `eval_dataset`"), std::string::npos) << e.what();
  }
}
