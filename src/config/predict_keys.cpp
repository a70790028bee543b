// The keys of LLaMA-Factory's predict run (predict_keys.h): declared here, listed in config_schema.cpp. The
// run itself is src/train/predict_run.cpp.
#include "predict_keys.h"

#include <string>
#include <string_view>

#include "schema_builders.h"

namespace lf::config {

using namespace schema;

namespace {

// What every generation key's sample needs beside it: a predict run of four examples, eight new tokens.
constexpr const char* kPredictContext =
    "do_train: false\ndo_predict: true\npredict_with_generate: true\neval_dataset: alpaca_en_demo\nmax_samples: 4\n"
    "per_device_eval_batch_size: 2\nmax_new_tokens: 8";

// A rule LLaMA-Factory's get_train_args enforces too, refused in its words (`quote`): "<where>: <what>:
// LLaMA-Factory refuses it too ("<quote>"); <fix>". The message only: LF_CHECK stays at each rule, for its line.
std::string refused_too(const std::string& where, std::string_view what, std::string_view quote, std::string_view fix) {
  return fmt::format("{}: {}: LLaMA-Factory refuses it too (\"{}\"); {}", where, what, quote, fix);
}

// LLaMA-Factory's get_train_args rules on predict (its words), and what lf-train does not run yet.
void check_predict(const Reader& r, const JobPlan& c) {
  const auto& p = c.predict;
  LF_CHECK(p.do_train || p.do_predict, ConfigError,
           "{}: `do_train: false` without `do_predict: true` asks for nothing to run; lf-train trains, or predicts "
           "(do_predict + predict_with_generate)", r.where("do_train"));
  if (p.do_predict)
    LF_CHECK(p.predict_with_generate || c.objective.stage != "sft", ConfigError, "{}",
             refused_too(r.where("do_predict"), "`do_predict: true` without `predict_with_generate: true`",
                         "Please enable `predict_with_generate` to save model predictions.",
                         "add predict_with_generate: true"));
  if (!p.do_predict && !p.predict_with_generate) return;
  const std::string asking = r.where(p.do_predict ? "do_predict" : "predict_with_generate");  // the key that predicts
  LF_CHECK(c.objective.stage == "sft", ConfigError,
           "{}: predict runs are sft's (LLaMA-Factory: \"`predict_with_generate` cannot be set as True except SFT\"); "
           "stage is {}", asking, c.objective.stage);
  LF_CHECK(!c.data.eval_dataset.empty() || c.data.val_size >= 1e-6, ConfigError, "{}",
           refused_too(asking, "nothing to predict for", "Please make sure eval_dataset be provided or val_size >1e-6",
                       "set eval_dataset"));
  if (!p.do_predict) {
    // LLaMA-Factory generates only when it evaluates or predicts: a training run without evaluation ignores it.
    LF_CHECK(c.eval.eval_strategy == "no", ConfigError,
             "{}: `predict_with_generate: true` with `eval_strategy: {}`: LLaMA-Factory's evaluation would generate "
             "and score BLEU / ROUGE; lf-train's evaluation computes eval_loss only. Remove predict_with_generate, or "
             "predict in a second job (do_predict: true)", r.where("predict_with_generate"), c.eval.eval_strategy);
    return;
  }
  LF_CHECK(!p.do_train, ConfigError,
           "{}: `do_predict: true` with `do_train: true`: lf-train runs training and prediction as two jobs: train, "
           "then predict with do_train: false and the trained output (adapter_name_or_path for LoRA, "
           "model_name_or_path for full)", r.where("do_predict"));
  LF_CHECK(!c.data.eval_dataset.empty(), ConfigError,
           "{}: a predict run reads `eval_dataset` (the examples it generates for); predicting a `val_size` split of "
           "`dataset` is not implemented: name the data in eval_dataset", r.where("do_predict"));
  LF_CHECK(c.parallel.zero_stage < 3, ConfigError, "{}",
           refused_too(r.where("do_predict"),
                       fmt::format("predict under zero_stage 3 (from {})", c.parallel.sharding_source),
                       "`predict_with_generate` is incompatible with DeepSpeed ZeRO-3.",
                       "remove the deepspeed config"));
  LF_CHECK(p.max_new_tokens > 0, ConfigError,
           "{}: `max_new_tokens: {}`: lf-train generates max_new_tokens new tokens (LLaMA-Factory falls back to "
           "max_length, the prompt included, when it is <= 0); set max_new_tokens > 0",
           r.where("max_new_tokens"), p.max_new_tokens);
}

KeyDecl with_rule(KeyDecl d, std::function<void(const Reader&, const JobPlan&)> rule) {
  d.check = [own = d.check, rule = std::move(rule)](const Reader& r, const JobPlan& c) {
    if (own) own(r, c);
    rule(r, c);
  };
  return d;
}

}  // namespace

std::vector<KeyDecl> predict_keys() {
  return {
      with_rule(implemented("do_train", LF_FIELD(predict, do_train),
                            "false: no training; with do_predict, a predict run of the model (and adapter) given")
                    .differs("unset, lf-train trains (with HF's false LLaMA-Factory would run nothing); unset with "
                             "do_predict: true it is false, HF's default")
                    .observe("file:trainer_log.jsonl"),
                check_predict),
      implemented("do_predict", LF_FIELD(predict, do_predict),
                  "sft: generate for every eval_dataset example (batched, left-padded, data-parallel) and write "
                  "generated_predictions.jsonl and predict_results.json as LLaMA-Factory does")
          .sample("true", "predict_with_generate: true\neval_dataset: alpaca_en_demo")
          .observe("file:generated_predictions.jsonl"),
      implemented("predict_with_generate", LF_FIELD(predict, predict_with_generate),
                  "do_predict: generate (needed, as in LLaMA-Factory); without do_predict, no effect unless evaluating "
                  "(refused then: lf-train's evaluation computes eval_loss)")
          .sample("true", "eval_dataset: alpaca_en_demo")
          .observe("file:generated_predictions.jsonl"),
      implemented("do_sample", LF_FIELD(predict, do_sample), "sampled generation (else greedy)")
          .sample("false", kPredictContext)
          .observe("predictions"),
      implemented("temperature", LF_FIELD(predict, temperature), "do_sample: the logits' divisor")
          .check(positive)
          .sample("0.5", kPredictContext)
          .observe("predictions"),
      implemented("top_p", LF_FIELD(predict, top_p), "do_sample: nucleus sampling's mass")
          .check(in_range(0, 1, true))
          .sample("0.2", kPredictContext)
          .observe("predictions"),
      implemented("top_k", LF_FIELD(predict, top_k), "do_sample: the most likely tokens kept (0: all)")
          .check(non_negative)
          .sample("2", kPredictContext)
          .observe("predictions"),
      implemented("max_new_tokens", LF_FIELD(predict, max_new_tokens), "do_predict: the most tokens generated a row")
          .sample("3", kPredictContext)
          .observe("predictions"),
      implemented("repetition_penalty", LF_FIELD(predict, repetition_penalty),
                  "generation: HF's RepetitionPenaltyLogitsProcessor")
          .check(positive)
          .sample("1.5", kPredictContext)
          .observe("predictions"),
      implemented("skip_special_tokens", LF_FIELD(predict, skip_special_tokens),
                  "generated_predictions.jsonl: decode predict and label without special tokens")
          .sample("false", kPredictContext)
          .observe("predictions"),
      only_values("num_beams", {"1"}, "beam search is not implemented: generation samples or is greedy"),
  };
}

}  // namespace lf::config
