#include <gtest/gtest.h>

#include <map>

#include "key_table.h"
#include "lf/common/error.h"
#include "lf/config/train_config.h"

using namespace lf::config;

namespace {

const std::string kMinimal = "model_name_or_path: models/tiny\ndataset: alpaca_en_demo\n";

std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    parse_train_config(yaml, overrides, "cfg.yaml");
  } catch (const lf::ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Config, EveryLlamaFactoryKeyIsKnown) {
  // The generated table holds LLaMA-Factory 0.9.5's ~350 keys, HF TrainingArguments included.
  EXPECT_GT(known_keys().size(), 300u);
  for (const char* k : {"report_to", "deepspeed", "quantization_bit", "lora_target", "template", "cutoff_len",
                        "ddp_timeout", "overwrite_cache", "preprocessing_num_workers", "init_weights",
                        "ddp_reduce_dtype"})
    EXPECT_NE(find_key(k), nullptr) << k;
}

TEST(Config, DefaultsAreLlamaFactorys) {
  auto c = parse_train_config(kMinimal, {}, "cfg.yaml").config;
  // Our field value (as YAML text) for each implemented key, checked against the generated default.
  std::map<std::string, std::string> ours = {
      {"stage", c.stage}, {"finetuning_type", c.finetuning_type}, {"lora_rank", std::to_string(c.lora_rank)},
      {"lora_dropout", std::to_string(c.lora_dropout)}, {"lora_target", c.lora_target.at(0)},
      {"dataset_dir", c.dataset_dir}, {"cutoff_len", std::to_string(c.cutoff_len)},
      {"val_size", std::to_string(c.val_size)}, {"train_on_prompt", c.train_on_prompt ? "true" : "false"},
      {"mask_history", c.mask_history ? "true" : "false"},
      {"per_device_train_batch_size", std::to_string(c.per_device_train_batch_size)},
      {"per_device_eval_batch_size", std::to_string(c.per_device_eval_batch_size)},
      {"gradient_accumulation_steps", std::to_string(c.gradient_accumulation_steps)},
      {"learning_rate", "5e-05"}, {"lr_scheduler_type", c.lr_scheduler_type},
      {"warmup_steps", std::to_string(c.warmup_steps)},
      {"num_train_epochs", std::to_string(c.num_train_epochs)}, {"max_steps", std::to_string(c.max_steps)},
      {"weight_decay", std::to_string(c.weight_decay)}, {"adam_beta1", std::to_string(c.adam_beta1)},
      {"adam_beta2", std::to_string(c.adam_beta2)}, {"adam_epsilon", "1e-08"},
      {"max_grad_norm", std::to_string(c.max_grad_norm)}, {"bf16", c.bf16 ? "true" : "false"},
      {"fp16", c.fp16 ? "true" : "false"}, {"seed", std::to_string(c.seed)}, {"eval_strategy", c.eval_strategy},
      {"logging_steps", std::to_string(c.logging_steps)}, {"save_strategy", c.save_strategy},
      {"save_steps", std::to_string(c.save_steps)}, {"plot_loss", c.plot_loss ? "true" : "false"},
      {"overwrite_output_dir", c.overwrite_output_dir ? "true" : "false"}};
  EXPECT_DOUBLE_EQ(c.learning_rate, 5e-5);
  EXPECT_DOUBLE_EQ(c.adam_epsilon, 1e-8);
  for (const auto& [key, value] : ours) {
    const KeySpec* spec = find_key(key);
    ASSERT_NE(spec, nullptr) << key;
    EXPECT_TRUE(equals_python_default(value, spec->default_repr))
        << key << ": ours " << value << ", LLaMA-Factory's " << spec->default_repr;
  }
  // Derived by LLaMA-Factory's rules rather than copied: lora_alpha = 2 x rank; checkpointing on.
  EXPECT_EQ(c.lora_alpha, 16);
  EXPECT_EQ(c.mix_strategy, "concat");
  EXPECT_TRUE(c.enable_thinking);
  EXPECT_EQ(c.preprocessing_batch_size, 1000);
  EXPECT_EQ(c.warmup_ratio, 0);  // None in transformers 5 (warmup_steps took over): no warmup
  EXPECT_TRUE(c.gradient_checkpointing);
}

TEST(Config, UnknownKeyNamesTheLineAndSuggests) {
  auto e = error_of(kMinimal + "lora_rnak: 16\n");
  EXPECT_NE(e.find("cfg.yaml:3: unknown key `lora_rnak`: did you mean lora_rank"), std::string::npos) << e;
  e = error_of(kMinimal + "zzzzzzzzzzzz: 1\n");
  EXPECT_NE(e.find("not a LLaMA-Factory or lf-train key"), std::string::npos) << e;
  // The key table's column names are not keys (its header once was read as a row).
  for (const std::string header : {"name", "dataclass"}) {
    e = error_of(kMinimal + header + ": x\n");
    EXPECT_NE(e.find("unknown key `" + header + "`"), std::string::npos) << e;
  }
}

TEST(Config, RefusedKeysAreErrorsOnlyWhenTheyWouldChangeTheResult) {
  auto e = error_of(kMinimal + "quantization_bit: 4\n");
  EXPECT_NE(e.find("`quantization_bit: 4` is refused: quantized (QLoRA) training"), std::string::npos) << e;
  EXPECT_EQ(error_of(kMinimal + "quantization_bit: null\n"), "");
  e = error_of(kMinimal + "stage: dpo\n");
  EXPECT_NE(e.find("`stage: dpo` is not supported"), std::string::npos) << e;
  e = error_of(kMinimal + "lr_scheduler_type: polynomial\n");
  EXPECT_NE(e.find("lr_scheduler_type: polynomial"), std::string::npos) << e;
  e = error_of(kMinimal + "optim: sgd\n");
  EXPECT_NE(e.find("`optim: sgd` is not supported"), std::string::npos) << e;
  e = error_of(kMinimal + "pissa_init: true\nneftune_noise_alpha: 5\n");
  EXPECT_NE(e.find("2 problems"), std::string::npos) << e;  // every problem at once
}

// stage: pt (LLaMA-Factory's rules): packing on unless set, SFT-only keys refused, other stages refused.
TEST(Config, PretrainingStage) {
  auto c = parse_train_config(kMinimal + "stage: pt\n", {}, "cfg.yaml").config;
  EXPECT_EQ(c.stage, "pt");
  EXPECT_TRUE(c.packing);
  EXPECT_FALSE(parse_train_config(kMinimal + "stage: pt\npacking: false\n", {}, "cfg.yaml").config.packing);
  EXPECT_FALSE(parse_train_config(kMinimal, {}, "cfg.yaml").config.packing);  // sft: off
  auto e = error_of(kMinimal + "stage: pt\nneat_packing: true\n");
  EXPECT_NE(e.find("`neat_packing` cannot be set as True except SFT"), std::string::npos) << e;
  e = error_of(kMinimal + "stage: pt\ntrain_on_prompt: true\n");
  EXPECT_NE(e.find("except SFT"), std::string::npos) << e;
  for (const std::string stage : {"rm", "ppo", "kto"}) {
    e = error_of(kMinimal + "stage: " + stage + "\n");
    EXPECT_NE(e.find("`stage: " + stage + "` is not supported"), std::string::npos) << e;
  }
}

TEST(Config, DataKeysThatLlamaFactoryUsersSet) {
  auto c = parse_train_config(kMinimal + "mix_strategy: interleave_under\ninterleave_probs: 0.3,0.7\n"
                                         "default_system: Be brief.\ntool_format: qwen\nenable_thinking: false\n",
                              {}, "cfg.yaml").config;
  EXPECT_EQ(c.mix_strategy, "interleave_under");
  EXPECT_EQ(c.interleave_probs, (std::vector<double>{0.3, 0.7}));
  EXPECT_EQ(c.default_system.value(), "Be brief.");
  EXPECT_EQ(c.tool_format.value(), "qwen");
  EXPECT_FALSE(c.enable_thinking);
  EXPECT_NE(error_of(kMinimal + "mix_strategy: random\n").find("mix_strategy: random"), std::string::npos);
}

TEST(Config, NoEffectKeysWarnWhenSet) {
  auto quiet = parse_train_config(kMinimal + "report_to: none\noverwrite_cache: false\npreprocessing_num_workers: 16\n", {}, "cfg.yaml");
  EXPECT_TRUE(quiet.warnings.empty());
  // (`deepspeed:` used to be the third key here, warned about as "run data-parallel"; it is read now:
  // deepspeed_test.cpp.)
  auto loud = parse_train_config(kMinimal + "push_to_hub: true\nddp_timeout: 9000\noverwrite_cache: true\n",
                                 {}, "cfg.yaml");
  ASSERT_EQ(loud.warnings.size(), 3u);
  std::string all = loud.warnings[0] + loud.warnings[1] + loud.warnings[2];
  EXPECT_NE(all.find("`push_to_hub: true` has no effect"), std::string::npos) << all;
  EXPECT_NE(all.find("`overwrite_cache: true` has no effect"), std::string::npos) << all;
}

// report_to: tensorboard is written by lf-train; the other integrations get one info line each
// (nothing reaches their services from here); a name transformers does not know is refused.
TEST(Config, ReportTo) {
  EXPECT_TRUE(parse_train_config(kMinimal, {}, "cfg.yaml").config.report_to.empty());
  EXPECT_TRUE(parse_train_config(kMinimal + "report_to: none\n", {}, "cfg.yaml").config.report_to.empty());
  auto tb = parse_train_config(kMinimal + "report_to: [TensorBoard, wandb, mlflow]\n", {}, "cfg.yaml");
  EXPECT_EQ(tb.config.report_to, (std::vector<std::string>{"tensorboard"}));
  EXPECT_TRUE(tb.warnings.empty());
  ASSERT_EQ(tb.notes.size(), 2u);
  EXPECT_NE(tb.notes[0].find("cfg.yaml:"), std::string::npos) << tb.notes[0];
  EXPECT_NE(tb.notes[0].find("`report_to: wandb` has no effect in lf-train"), std::string::npos) << tb.notes[0];
  EXPECT_NE(tb.notes[1].find("`report_to: mlflow` has no effect"), std::string::npos) << tb.notes[1];
  auto all = parse_train_config(kMinimal, {"report_to=all"}, "cfg.yaml");
  EXPECT_EQ(all.config.report_to, (std::vector<std::string>{"tensorboard"}));
  EXPECT_TRUE(all.notes.empty());
  const std::string e = error_of(kMinimal + "report_to: tensorbord\n");
  EXPECT_NE(e.find("`report_to: tensorbord` is not an integration transformers knows"), std::string::npos) << e;
  EXPECT_NE(e.find("expected tensorboard"), std::string::npos) << e;
}

// LLaMA-Factory's kernel switches ask for what lf-train always does: one info line, no warning.
TEST(Config, KernelSwitchesGetAnInfoLineNotAWarning) {
  auto on = parse_train_config(kMinimal + "enable_liger_kernel: true\nuse_unsloth: true\n", {}, "cfg.yaml");
  EXPECT_TRUE(on.warnings.empty());
  ASSERT_EQ(on.notes.size(), 2u);
  EXPECT_NE(on.notes[0].find("`enable_liger_kernel: true`: lf-train's own fused kernels"), std::string::npos)
      << on.notes[0];
  EXPECT_NE(on.notes[1].find("`use_unsloth: true`"), std::string::npos) << on.notes[1];
  auto off = parse_train_config(kMinimal + "enable_liger_kernel: false\n", {}, "cfg.yaml");
  EXPECT_TRUE(off.notes.empty() && off.warnings.empty());
}

TEST(Config, OverridesWinAndAreTyped) {
  auto c = parse_train_config(kMinimal + "learning_rate: 1.0e-4\nlora_target: q_proj,v_proj\n",
                              {"learning_rate=2e-5", "bf16=true", "lora_target=[q_proj, k_proj, o_proj]"}, "cfg.yaml")
               .config;
  EXPECT_DOUBLE_EQ(c.learning_rate, 2e-5);
  EXPECT_TRUE(c.bf16);
  EXPECT_EQ(c.lora_target, (std::vector<std::string>{"q_proj", "k_proj", "o_proj"}));
  EXPECT_NE(error_of(kMinimal, {"learning_rate"}).find("is not key=value"), std::string::npos);
  EXPECT_NE(error_of(kMinimal, {"lora_rank=abc"}).find("`lora_rank` must be an integer, got 'abc'"), std::string::npos);
}

TEST(Config, MalformedYamlNamesLineAndColumn) {
  auto e = error_of("model_name_or_path: x\ndataset: [a, b\n");
  EXPECT_NE(e.find("cfg.yaml:"), std::string::npos);
  EXPECT_NE(e.find("malformed YAML"), std::string::npos) << e;
  EXPECT_NE(error_of("- a\n- b\n").find("expected a mapping"), std::string::npos);
}

TEST(Config, ValidatesBeforeAnythingHeavy) {
  EXPECT_NE(error_of("dataset: a\n").find("`model_name_or_path` is required"), std::string::npos);
  EXPECT_NE(error_of(kMinimal + "bf16: true\nfp16: true\n").find("choose one"), std::string::npos);
  EXPECT_NE(error_of(kMinimal + "cutoff_len: 0\n").find("`cutoff_len` must be > 0"), std::string::npos);
  EXPECT_NE(error_of(kMinimal + "do_train: false\n").find("lf-train only trains"), std::string::npos);
  EXPECT_NE(error_of(kMinimal + "ddp_reduce_dtype: fp16\n").find("ddp_reduce_dtype"), std::string::npos);
  EXPECT_EQ(parse_train_config(kMinimal + "ddp_reduce_dtype: bf16\n", {}, "c").config.ddp_reduce_dtype, "bf16");
  EXPECT_NE(error_of(kMinimal + "disable_gradient_checkpointing: true\n"), "x");
  EXPECT_FALSE(parse_train_config(kMinimal + "disable_gradient_checkpointing: true\n", {}, "c").config.gradient_checkpointing);
}

TEST(Config, CanonicalTextChangesWithTheConfig) {
  auto a = parse_train_config(kMinimal, {}, "a").canonical;
  auto b = parse_train_config(kMinimal, {"seed=1"}, "b").canonical;
  EXPECT_NE(a, b);
  EXPECT_EQ(a, parse_train_config(kMinimal, {}, "c").canonical);
}

TEST(Config, MissingFileIsAClearError) {
  try {
    load_train_config("/nonexistent/cfg.yaml", {});
    FAIL();
  } catch (const lf::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read config '/nonexistent/cfg.yaml'"), std::string::npos);
  }
}

// LLaMA-Factory's SFT path uses each of these: ignoring them would change what is trained.
TEST(Config, KeysThatChangeTheResultAreRefusedNotWarned) {
  for (const std::string line : {"pure_bf16: true", "disable_shuffling: true", "use_dft_loss: true",
                                 "use_eaft_loss: true", "ignore_pad_token_for_loss: false",
                                 "load_best_model_at_end: true", "early_stopping_steps: 3"}) {
    const auto e = error_of(kMinimal + line + "\n");
    EXPECT_NE(e.find("is refused"), std::string::npos) << line << ": " << e;
  }
  EXPECT_EQ(error_of(kMinimal + "ignore_pad_token_for_loss: true\npure_bf16: false\n"), "") << "their defaults";
}

TEST(Config, EvaluationWithNothingToEvaluateOnIsRefusedLikeLlamaFactory) {
  auto e = error_of(kMinimal + "eval_strategy: steps\n");
  EXPECT_NE(e.find("`eval_strategy: steps` but there is nothing to evaluate on"), std::string::npos) << e;
  EXPECT_NE(error_of(kMinimal + "eval_strategy: epoch\nval_size: 0\n"), "");
  EXPECT_EQ(error_of(kMinimal + "eval_strategy: steps\nval_size: 0.1\n"), "");
  EXPECT_EQ(error_of(kMinimal + "eval_strategy: steps\nval_size: 20\n"), "");  // a number of examples
  EXPECT_EQ(error_of(kMinimal + "eval_strategy: steps\neval_dataset: alpaca_en_demo\n"), "");
  EXPECT_EQ(error_of(kMinimal + "val_size: 0\n"), "");  // no evaluation asked for
}

// Issue 18's keys (LLaMA-Factory's meaning): rsLoRA, LoRA+, HF's token counter.
TEST(Config, LoraOptionsAndTheTokenCounter) {
  auto c = parse_train_config(kMinimal + "use_rslora: true\nloraplus_lr_ratio: 16\ninclude_num_input_tokens_seen: true\n",
                              {}, "cfg.yaml").config;
  EXPECT_TRUE(c.use_rslora);
  EXPECT_DOUBLE_EQ(c.loraplus_lr_ratio, 16);
  EXPECT_EQ(c.include_num_input_tokens_seen, "all");  // HF maps true to "all"
  EXPECT_EQ(parse_train_config(kMinimal, {}, "cfg.yaml").config.include_num_input_tokens_seen, "no");
  EXPECT_EQ(parse_train_config(kMinimal + "include_num_input_tokens_seen: non_padding\n", {}, "cfg.yaml")
                .config.include_num_input_tokens_seen, "non_padding");
  auto e = error_of(kMinimal + "include_num_input_tokens_seen: some\n");
  EXPECT_NE(e.find("include_num_input_tokens_seen: some"), std::string::npos) << e;
  e = error_of(kMinimal + "finetuning_type: full\nloraplus_lr_ratio: 16\n");
  EXPECT_NE(e.find("`loraplus_lr_ratio` is LoRA's"), std::string::npos) << e;
  e = error_of(kMinimal + "loraplus_lr_ratio: -1\n");
  EXPECT_NE(e.find("must be >= 0"), std::string::npos) << e;
  // DoRA: LoRA's, as LLaMA-Factory rules.
  EXPECT_TRUE(parse_train_config(kMinimal + "use_dora: true\n", {}, "cfg.yaml").config.use_dora);
  for (const std::string type : {"full", "freeze"}) {
    e = error_of(kMinimal + "finetuning_type: " + type + "\nuse_dora: true\n");
    EXPECT_NE(e.find("`use_dora` is only valid for LoRA training"), std::string::npos) << e;
    EXPECT_NE(e.find("finetuning_type: lora"), std::string::npos) << e;  // what to try
  }
}
