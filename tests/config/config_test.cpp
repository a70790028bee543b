#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <tuple>

#include <stdlib.h>

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
  auto c = parse_train_config(kMinimal, {}, "cfg.yaml").plan;
  // Our field value (as YAML text) for each implemented key, checked against the generated default.
  std::map<std::string, std::string> ours = {
      {"stage", c.objective.stage}, {"finetuning_type", c.adapter.finetuning_type}, {"lora_rank", std::to_string(c.adapter.lora_rank)},
      {"lora_dropout", std::to_string(c.adapter.lora_dropout)}, {"lora_target", c.adapter.lora_target.at(0)},
      {"dataset_dir", c.data.dataset_dir}, {"cutoff_len", std::to_string(c.data.cutoff_len)},
      {"val_size", std::to_string(c.data.val_size)}, {"train_on_prompt", c.data.train_on_prompt ? "true" : "false"},
      {"mask_history", c.data.mask_history ? "true" : "false"},
      {"per_device_train_batch_size", std::to_string(c.schedule.per_device_train_batch_size)},
      {"per_device_eval_batch_size", std::to_string(c.eval.per_device_eval_batch_size)},
      {"gradient_accumulation_steps", std::to_string(c.schedule.gradient_accumulation_steps)},
      {"learning_rate", "5e-05"}, {"lr_scheduler_type", c.schedule.lr_scheduler_type},
      {"warmup_steps", std::to_string(c.schedule.warmup_steps)},
      {"num_train_epochs", std::to_string(c.schedule.num_train_epochs)}, {"max_steps", std::to_string(c.schedule.max_steps)},
      {"weight_decay", std::to_string(c.optim.weight_decay)}, {"adam_beta1", std::to_string(c.optim.adam_beta1)},
      {"adam_beta2", std::to_string(c.optim.adam_beta2)}, {"adam_epsilon", "1e-08"},
      {"max_grad_norm", std::to_string(c.optim.max_grad_norm)}, {"bf16", c.precision.bf16 ? "true" : "false"},
      {"fp16", c.precision.fp16 ? "true" : "false"}, {"seed", std::to_string(c.seed)}, {"eval_strategy", c.eval.eval_strategy},
      {"logging_steps", std::to_string(c.logging.logging_steps)}, {"save_strategy", c.output.save_strategy},
      {"save_steps", std::to_string(c.output.save_steps)}, {"plot_loss", c.output.plot_loss ? "true" : "false"},
      {"overwrite_output_dir", c.output.overwrite_output_dir ? "true" : "false"}};
  EXPECT_DOUBLE_EQ(c.optim.learning_rate, 5e-5);
  EXPECT_DOUBLE_EQ(c.optim.adam_epsilon, 1e-8);
  for (const auto& [key, value] : ours) {
    const KeySpec* spec = find_key(key);
    ASSERT_NE(spec, nullptr) << key;
    EXPECT_TRUE(equals_python_default(value, spec->default_repr))
        << key << ": ours " << value << ", LLaMA-Factory's " << spec->default_repr;
  }
  // Derived by LLaMA-Factory's rules rather than copied: lora_alpha = 2 x rank; checkpointing on.
  EXPECT_EQ(c.adapter.lora_alpha, 16);
  EXPECT_EQ(c.data.mix_strategy, "concat");
  EXPECT_TRUE(c.data.enable_thinking);
  EXPECT_EQ(c.data.preprocessing_batch_size, 1000);
  EXPECT_EQ(c.schedule.warmup_ratio, 0);  // None in transformers 5 (warmup_steps took over): no warmup
  EXPECT_TRUE(c.model.gradient_checkpointing);
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
  auto e = error_of(kMinimal + "neftune_noise_alpha: 5\n");
  EXPECT_NE(e.find("`neftune_noise_alpha: 5` is refused: NEFTune noise is not supported"), std::string::npos) << e;
  EXPECT_EQ(error_of(kMinimal + "quantization_bit: null\n"), "");
  e = error_of(kMinimal + "stage: ppo\n");
  EXPECT_NE(e.find("`stage: ppo` is not supported"), std::string::npos) << e;
  e = error_of(kMinimal + "lr_scheduler_type: polynomial\n");
  EXPECT_NE(e.find("lr_scheduler_type: polynomial"), std::string::npos) << e;
  e = error_of(kMinimal + "optim: sgd\n");
  EXPECT_NE(e.find("`optim: sgd` is not supported"), std::string::npos) << e;
  e = error_of(kMinimal + "disable_shuffling: true\nneftune_noise_alpha: 5\n");
  EXPECT_NE(e.find("2 problems"), std::string::npos) << e;  // every problem at once
}

// LLaMA-Factory's DataArguments: `packing: true` or neat_packing packs into cutoff_len - 1 tokens (rows padded to
// cutoff_len); pt's packing left unset, and no packing, keep cutoff_len.
TEST(Config, PackingCutoff) {
  const auto cutoff = [](const std::string& extra) {
    return parse_train_config(kMinimal + "cutoff_len: 64\n" + extra, {}, "cfg.yaml").plan.data.cutoff_len;
  };
  EXPECT_EQ(cutoff(""), 64);
  EXPECT_EQ(cutoff("packing: false\n"), 64);
  EXPECT_EQ(cutoff("packing: true\n"), 63);
  EXPECT_EQ(cutoff("neat_packing: true\n"), 63);
  EXPECT_EQ(cutoff("packing: false\nneat_packing: true\n"), 63);  // neat_packing packs
  EXPECT_EQ(cutoff("stage: pt\n"), 64);                             // packs, but packing was not asked for
  EXPECT_EQ(cutoff("stage: pt\npacking: true\n"), 63);
}

// stage: pt (LLaMA-Factory's rules): packing on unless set, SFT-only keys refused; ppo refused, the
// preference stages read.
TEST(Config, PretrainingStage) {
  auto c = parse_train_config(kMinimal + "stage: pt\n", {}, "cfg.yaml").plan;
  EXPECT_EQ(c.objective.stage, "pt");
  EXPECT_TRUE(c.data.packing);
  EXPECT_FALSE(parse_train_config(kMinimal + "stage: pt\npacking: false\n", {}, "cfg.yaml").plan.data.packing);
  EXPECT_FALSE(parse_train_config(kMinimal, {}, "cfg.yaml").plan.data.packing);  // sft: off
  auto e = error_of(kMinimal + "stage: pt\nneat_packing: true\n");
  EXPECT_NE(e.find("`neat_packing` cannot be set as True except SFT"), std::string::npos) << e;
  e = error_of(kMinimal + "stage: pt\ntrain_on_prompt: true\n");
  EXPECT_NE(e.find("except SFT"), std::string::npos) << e;
  e = error_of(kMinimal + "stage: ppo\n");
  EXPECT_NE(e.find("`stage: ppo` is not supported"), std::string::npos) << e;
  for (const std::string stage : {"rm", "dpo", "kto"})
    EXPECT_EQ(parse_train_config(kMinimal + "stage: " + stage + "\n", {}, "cfg.yaml").plan.objective.stage, stage);
  e = error_of(kMinimal + "stage: dpo\npref_loss: ipo\ndpo_label_smoothing: 0.1\n");
  EXPECT_NE(e.find("`dpo_label_smoothing` is only valid for the sigmoid loss"), std::string::npos) << e;
  e = error_of(kMinimal + "stage: dpo\npref_loss: kto_pair\n");
  EXPECT_NE(e.find("`pref_loss: kto_pair` is not supported"), std::string::npos) << e;
  EXPECT_NE(e.find("TRL"), std::string::npos) << e;
  EXPECT_EQ(parse_train_config(kMinimal + "stage: rm\nzero_stage: 3\n", {}, "cfg.yaml").plan.parallel.zero_stage, 3);
}

TEST(Config, DataKeysThatLlamaFactoryUsersSet) {
  auto c = parse_train_config(kMinimal + "mix_strategy: interleave_under\ninterleave_probs: 0.3,0.7\n"
                                         "default_system: Be brief.\ntool_format: qwen\nenable_thinking: false\n",
                              {}, "cfg.yaml").plan;
  EXPECT_EQ(c.data.mix_strategy, "interleave_under");
  EXPECT_EQ(c.data.interleave_probs, (std::vector<double>{0.3, 0.7}));
  EXPECT_EQ(c.data.default_system.value(), "Be brief.");
  EXPECT_EQ(c.data.tool_format.value(), "qwen");
  EXPECT_FALSE(c.data.enable_thinking);
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
  EXPECT_TRUE(parse_train_config(kMinimal, {}, "cfg.yaml").plan.logging.report_to.empty());
  EXPECT_TRUE(parse_train_config(kMinimal + "report_to: none\n", {}, "cfg.yaml").plan.logging.report_to.empty());
  auto tb = parse_train_config(kMinimal + "report_to: [TensorBoard, wandb, mlflow]\n", {}, "cfg.yaml");
  EXPECT_EQ(tb.plan.logging.report_to, (std::vector<std::string>{"tensorboard"}));
  EXPECT_TRUE(tb.warnings.empty());
  ASSERT_EQ(tb.notes.size(), 2u);
  EXPECT_NE(tb.notes[0].find("cfg.yaml:"), std::string::npos) << tb.notes[0];
  EXPECT_NE(tb.notes[0].find("`report_to: wandb` has no effect in lf-train"), std::string::npos) << tb.notes[0];
  EXPECT_NE(tb.notes[1].find("`report_to: mlflow` has no effect"), std::string::npos) << tb.notes[1];
  auto all = parse_train_config(kMinimal, {"report_to=all"}, "cfg.yaml");
  EXPECT_EQ(all.plan.logging.report_to, (std::vector<std::string>{"tensorboard"}));
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
               .plan;
  EXPECT_DOUBLE_EQ(c.optim.learning_rate, 2e-5);
  EXPECT_TRUE(c.precision.bf16);
  EXPECT_EQ(c.adapter.lora_target, (std::vector<std::string>{"q_proj", "k_proj", "o_proj"}));
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
  EXPECT_NE(error_of(kMinimal + "do_train: false\n").find("asks for nothing to run"), std::string::npos);
  EXPECT_NE(error_of(kMinimal + "ddp_reduce_dtype: fp16\n").find("ddp_reduce_dtype"), std::string::npos);
  EXPECT_EQ(parse_train_config(kMinimal + "ddp_reduce_dtype: bf16\n", {}, "c").plan.parallel.ddp_reduce_dtype, "bf16");
  EXPECT_NE(error_of(kMinimal + "disable_gradient_checkpointing: true\n"), "x");
  EXPECT_FALSE(parse_train_config(kMinimal + "disable_gradient_checkpointing: true\n", {}, "c").plan.model.gradient_checkpointing);
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
  for (const std::string line : {"disable_shuffling: true",
                                 "group_by_length: true", "ignore_pad_token_for_loss: false",
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
                              {}, "cfg.yaml").plan;
  EXPECT_TRUE(c.adapter.use_rslora);
  EXPECT_DOUBLE_EQ(c.optim.loraplus_lr_ratio, 16);
  EXPECT_EQ(c.logging.include_num_input_tokens_seen, "all");  // HF maps true to "all"
  EXPECT_EQ(parse_train_config(kMinimal, {}, "cfg.yaml").plan.logging.include_num_input_tokens_seen, "no");
  EXPECT_EQ(parse_train_config(kMinimal + "include_num_input_tokens_seen: non_padding\n", {}, "cfg.yaml")
                .plan.logging.include_num_input_tokens_seen, "non_padding");
  auto e = error_of(kMinimal + "include_num_input_tokens_seen: some\n");
  EXPECT_NE(e.find("include_num_input_tokens_seen: some"), std::string::npos) << e;
  e = error_of(kMinimal + "finetuning_type: full\nloraplus_lr_ratio: 16\n");
  EXPECT_NE(e.find("`loraplus_lr_ratio` is LoRA's"), std::string::npos) << e;
  e = error_of(kMinimal + "loraplus_lr_ratio: -1\n");
  EXPECT_NE(e.find("must be >= 0"), std::string::npos) << e;
  // DoRA: LoRA's, as LLaMA-Factory rules.
  EXPECT_TRUE(parse_train_config(kMinimal + "use_dora: true\n", {}, "cfg.yaml").plan.adapter.use_dora);
  for (const std::string type : {"full", "freeze"}) {
    e = error_of(kMinimal + "finetuning_type: " + type + "\nuse_dora: true\n");
    EXPECT_NE(e.find("`use_dora` is only valid for LoRA training"), std::string::npos) << e;
    EXPECT_NE(e.find("finetuning_type: lora"), std::string::npos) << e;  // what to try
  }
}

// OFT (issue 34): exactly one of oft_rank / oft_block_size (peft's OFTConfig); LLaMA-Factory's LoRA-only rules hold.
TEST(Config, OftKeysFollowPeftAndLlamaFactory) {
  const auto c = parse_train_config(kMinimal + "finetuning_type: oft\noft_rank: 4\noft_block_size: 0\n", {}, "cfg.yaml").plan;
  EXPECT_TRUE(c.adapter.oft() && c.adapter.peft() && !c.adapter.lora());
  EXPECT_EQ(c.adapter.oft_rank, 4);
  auto e = error_of(kMinimal + "finetuning_type: oft\noft_rank: 4\n");  // oft_block_size 32 by default
  EXPECT_NE(e.find("exactly one of oft_rank and oft_block_size"), std::string::npos) << e;
  EXPECT_NE(e.find("oft_block_size: 0"), std::string::npos) << e;  // what to try
  e = error_of(kMinimal + "finetuning_type: oft\noft_block_size: 0\n");
  EXPECT_NE(e.find("exactly one of oft_rank and oft_block_size"), std::string::npos) << e;
  for (const std::string key : {"use_rslora: true", "use_dora: true", "adapter_name_or_path: a"}) {
    e = error_of(kMinimal + "finetuning_type: oft\n" + key + "\n");
    EXPECT_TRUE(e.find("only valid for the LoRA method") != std::string::npos ||
                e.find("only valid for LoRA training") != std::string::npos)
        << key << ": " << e;
  }
  EXPECT_EQ(error_of(kMinimal + "finetuning_type: oft\nadditional_target: norm\n"), "");
}

// Issue 29 finding 5: what torch.optim.AdamW refuses is refused before anything starts, naming
// the key (was: adam_beta1=2 trained; adam_beta2=1.5 gave NaN at step 2, blamed on learning_rate).
TEST(Config, OptimizerSettingsTorchRefusesAreRefused) {
  for (const auto& [kv, says] : std::vector<std::pair<std::string, std::string>>{
           {"adam_beta1=2", "`adam_beta1: 2`: expected 0 <= adam_beta1 < 1"},
           {"adam_beta1=-0.1", "Invalid beta parameter at index 0"},
           {"adam_beta2=1.5", "Invalid beta parameter at index 1: 1.5"},
           {"adam_beta2=1", "< 1"},
           {"adam_epsilon=-1", "Invalid epsilon value: -1"},
           {"weight_decay=-1", "Invalid weight_decay value: -1"},
           {"learning_rate=-0.001", "Invalid learning rate"},
           {"warmup_steps=-3", "`warmup_steps` must be >= 0"},
           {"num_train_epochs=-1", "`num_train_epochs` must be >= 0"},
           {"lora_alpha=-4", "`lora_alpha` must be >= 0"},
           {"eval_steps=0", "`eval_steps` must be > 0 when set"},
           {"save_total_limit=0", "`save_total_limit` must be > 0 when set"}}) {
    const auto m = error_of(kMinimal, {kv});
    EXPECT_NE(m.find(says), std::string::npos) << kv << " -> " << m;
    EXPECT_NE(m.find("override " + kv), std::string::npos) << kv << ": the message names where: " << m;
  }
  EXPECT_EQ(error_of(kMinimal, {"adam_beta1=0", "adam_beta2=0.95", "weight_decay=0.1", "learning_rate=0"}), "");
}

// Issue 29 finding 6: a key given twice is an error naming both lines (was: the last one won).
TEST(Config, AKeyGivenTwiceNamesBothLines) {
  const auto m = error_of(kMinimal + "learning_rate: 1e-4\ncutoff_len: 64\nlearning_rate: 2e-4\n");
  EXPECT_NE(m.find("cfg.yaml:5: `learning_rate` is given twice (first at cfg.yaml:3)"), std::string::npos) << m;
  // An override still wins over the file: that is what overrides are for.
  EXPECT_DOUBLE_EQ(parse_train_config(kMinimal + "learning_rate: 1e-4\n", {"learning_rate=3e-4"}, "c").plan.optim.learning_rate,
                   3e-4);
}

// Issue 28: keys that would change the result are refused, not accepted "with no effect" (FP8 and the ASFT loss
// were, until issues 33 and 34 implemented them).
TEST(Config, KeysThatWouldChangeTheResultAreRefusedNotIgnored) {
  for (const auto& [kv, says] : std::vector<std::pair<std::string, std::string>>{
           {"use_cpu=true", "CUDA_VISIBLE_DEVICES="},
           {"ignore_data_skip=true", "exact example of the checkpoint's cursor"}}) {
    const auto m = error_of(kMinimal, {kv});
    EXPECT_NE(m.find(says), std::string::npos) << kv << " -> " << m;
  }
}

// Issue 33: FP8's keys as LLaMA-Factory reads them (every backend accepted: lf-train has one), the recipe
// key, and LLaMA-Factory's rule against quantization. The hardware refusal is the worker's.
TEST(Config, Fp8KeysAndTheirRules) {
  const auto plan = parse_train_config(kMinimal, {"fp8=true", "fp8_backend=te", "fp8_recipe=tensorwise"}, "c").plan;
  EXPECT_TRUE(plan.precision.fp8);
  EXPECT_EQ(plan.precision.fp8_recipe, "tensorwise");
  EXPECT_EQ(parse_train_config(kMinimal, {"fp8=true"}, "c").plan.precision.fp8_recipe, "rowwise");
  EXPECT_NE(error_of(kMinimal, {"fp8=true", "fp8_recipe=delayed"}).find("fp8_recipe: delayed"), std::string::npos);
  EXPECT_NE(error_of(kMinimal, {"fp8_recipe=tensorwise"}).find("set `fp8: true`"), std::string::npos);
  EXPECT_NE(error_of(kMinimal, {"fp8=true", "finetuning_type=lora", "quantization_bit=4"})
                .find("FP8 training is not compatible with quantization"),
            std::string::npos);
  const auto gather = parse_train_config(kMinimal, {"fp8=true", "fp8_enable_fsdp_float8_all_gather=true"}, "c");
  ASSERT_EQ(gather.warnings.size(), 1u);
  EXPECT_NE(gather.warnings[0].find("fp8_enable_fsdp_float8_all_gather"), std::string::npos);
  EXPECT_EQ(parse_train_config(kMinimal, {"fp8=true", "fp8_backend=te"}, "c").warnings.size(), 1u);  // no effect: said
}

// The LF_* knobs that choose how components run are read once, into the plan (plan_knobs.cpp),
// and validated there: a bad value fails before anything starts, naming the variable.
TEST(Config, KnobsAreResolvedIntoThePlanOnce) {
  const auto scoped = [](const char* name, const char* value) {
    ::setenv(name, value, 1);
    return std::unique_ptr<const char, void (*)(const char*)>(name, [](const char* n) { ::unsetenv(n); });
  };
  {
    const auto defaults = parse_train_config(kMinimal, {}, "c").plan;
    EXPECT_TRUE(defaults.model.kernels.fused_kernels && defaults.model.kernels.lean_recompute &&
                defaults.model.kernels.cuda_graphs && defaults.optim.fused_clip && defaults.parallel.ddp_grad_sink);
    EXPECT_EQ(defaults.model.kernels.cuda_graph_bucket, 128);
    EXPECT_EQ(defaults.logging.profile_trace_first, 6);
  }
  {
    auto a = scoped("LF_LEAN_RECOMPUTE", "0"), b = scoped("LF_CUDA_GRAPH_BUCKET", "64"),
         d = scoped("LF_DDP_SPARSE_EMBEDDING", "1"), e = scoped("LF_PROFILE_TRACE_STEPS", "3:9"),
         f = scoped("LF_SDPA_BACKEND", "flash");
    const auto p = parse_train_config(kMinimal, {}, "c").plan;
    EXPECT_FALSE(p.model.kernels.lean_recompute);
    EXPECT_EQ(p.model.kernels.cuda_graph_bucket, 64);
    EXPECT_EQ(p.parallel.ddp_sparse_embedding, "1");
    EXPECT_EQ(p.logging.profile_trace_first, 3);
    EXPECT_EQ(p.logging.profile_trace_last, 9);
    EXPECT_EQ(p.model.kernels.sdpa_backend, "flash");
  }
  for (const auto& [name, value, says] : std::vector<std::tuple<const char*, const char*, std::string>>{
           {"LF_FUSED_KERNELS", "off", "LF_FUSED_KERNELS=off: expected 1"},
           {"LF_CUDA_GRAPH_BUCKET", "100", "LF_CUDA_GRAPH_BUCKET: expected a positive multiple of 8"},
           {"LF_CUDA_GRAPHS", "yes", "LF_CUDA_GRAPHS"},
           {"LF_SDPA_BACKEND", "fa3", "LF_SDPA_BACKEND"},
           {"LF_PROFILE_TRACE_STEPS", "9:3", "LF_PROFILE_TRACE_STEPS=9:3"}}) {
    auto s = scoped(name, value);
    EXPECT_NE(error_of(kMinimal).find(says), std::string::npos) << name << "=" << value << ": " << error_of(kMinimal);
  }
}

// Issue 34: what LLaMA-Factory's examples need offline, its key list over transformers 4.55-5.6, and the
// rules around its methods and losses.
TEST(Config, LlamaFactoryExamplesRulesIssue34) {
  auto e = error_of(kMinimal + "dataset_dir: REMOTE:llamafactory/demo_data\n");
  EXPECT_NE(e.find("llamafactory/demo_data"), std::string::npos) << e;
  EXPECT_NE(e.find("offline"), std::string::npos) << e;
  e = error_of(kMinimal + "dataset_dir: ONLINE\n");
  EXPECT_NE(e.find("Hugging Face Hub"), std::string::npos) << e;
  // transformers 4.x's keys: known (no did-you-mean error), the wrap key without effect, the order one refused.
  EXPECT_EQ(error_of(kMinimal + "fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer\n"), "");
  EXPECT_NE(error_of(kMinimal + "group_by_length: true\n").find("is refused"), std::string::npos);
  e = error_of(kMinimal + "stage: pt\nuse_dft_loss: true\n");
  EXPECT_NE(e.find("sft"), std::string::npos) << e;
  e = error_of(kMinimal + "use_dft_loss: true\nuse_eaft_loss: true\n");
  EXPECT_NE(e.find("keep one"), std::string::npos) << e;
  EXPECT_EQ(error_of(kMinimal + "use_eaft_loss: true\neaft_alpha: 0.5\n"), "");
  e = error_of(kMinimal + "finetuning_type: lora\nuse_llama_pro: true\n");
  EXPECT_NE(e.find("use_llama_pro"), std::string::npos) << e;
  EXPECT_EQ(error_of(kMinimal + "finetuning_type: freeze\nuse_llama_pro: true\nfreeze_trainable_layers: 2\n"), "");
  e = error_of(kMinimal + "finetuning_type: full\npissa_init: true\n");
  EXPECT_NE(e.find("only valid for LoRA"), std::string::npos) << e;
  EXPECT_EQ(error_of(kMinimal + "finetuning_type: lora\npissa_init: true\npissa_iter: -1\npissa_convert: true\n"), "");
  e = error_of(kMinimal + "mixture_of_depths: convert\n");
  EXPECT_NE(e.find("mixture-of-depth"), std::string::npos) << e;
}
