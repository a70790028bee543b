// Predict's keys (src/config/predict_keys.cpp): LLaMA-Factory's rules in its words, do_train's default with
// do_predict, the generation keys read into the plan.
#include <gtest/gtest.h>

#include "lf/common/error.h"
#include "lf/config/train_config.h"

using namespace lf::config;

namespace {

const std::string kPredict =
    "model_name_or_path: models/tiny\nstage: sft\ndo_predict: true\npredict_with_generate: true\n"
    "eval_dataset: alpaca_en_demo\n";

std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    parse_train_config(yaml, overrides, "cfg.yaml");
  } catch (const lf::ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(PredictKeys, ThePredictExampleNeedsNoDatasetNorDoTrain) {
  // examples/extras/nlg_eval leaves do_train unset (HF's default false) and names no `dataset`.
  const auto c = parse_train_config(kPredict, {}, "c").plan;
  EXPECT_FALSE(c.predict.do_train);
  EXPECT_TRUE(c.predict.do_predict);
  EXPECT_TRUE(c.predict.do_sample);  // LLaMA-Factory's GeneratingArguments defaults
  EXPECT_DOUBLE_EQ(c.predict.temperature, 0.95);
  EXPECT_DOUBLE_EQ(c.predict.top_p, 0.7);
  EXPECT_EQ(c.predict.top_k, 50);
  EXPECT_EQ(c.predict.max_new_tokens, 1024);
  EXPECT_TRUE(c.predict.skip_special_tokens);
}

TEST(PredictKeys, GenerationKeysAreRead) {
  const auto c = parse_train_config(kPredict + "do_sample: false\ntemperature: 0.5\ntop_p: 0.9\ntop_k: 3\n"
                                    "max_new_tokens: 7\nrepetition_penalty: 1.2\nskip_special_tokens: false\n",
                                    {}, "c").plan;
  EXPECT_FALSE(c.predict.do_sample);
  EXPECT_DOUBLE_EQ(c.predict.temperature, 0.5);
  EXPECT_DOUBLE_EQ(c.predict.top_p, 0.9);
  EXPECT_EQ(c.predict.top_k, 3);
  EXPECT_EQ(c.predict.max_new_tokens, 7);
  EXPECT_DOUBLE_EQ(c.predict.repetition_penalty, 1.2);
  EXPECT_FALSE(c.predict.skip_special_tokens);
}

TEST(PredictKeys, LlamaFactorysRulesAndWhatIsNotRun) {
  EXPECT_NE(error_of(kPredict, {"predict_with_generate=false"}).find("Please enable `predict_with_generate`"),
            std::string::npos);
  EXPECT_NE(error_of(kPredict, {"stage=pt"}).find("except SFT"), std::string::npos);
  EXPECT_NE(error_of(kPredict + "dataset: alpaca_en_demo\n", {"do_train=true"}).find("two jobs"), std::string::npos);
  EXPECT_NE(error_of("model_name_or_path: m\ndo_predict: true\npredict_with_generate: true\n").find("eval_dataset"),
            std::string::npos);
  EXPECT_NE(error_of("model_name_or_path: m\ndataset: a\nval_size: 0.1\ndo_predict: true\npredict_with_generate: true\n")
                .find("not implemented"), std::string::npos);
  EXPECT_NE(error_of(kPredict, {"num_beams=2"}).find("num_beams"), std::string::npos);
  EXPECT_NE(error_of(kPredict, {"max_new_tokens=0"}).find("max_new_tokens"), std::string::npos);
  EXPECT_NE(error_of(kPredict, {"temperature=0"}).find("temperature"), std::string::npos);
  // Without do_predict LLaMA-Factory generates only when it evaluates: no effect, or refused when evaluating.
  EXPECT_EQ(error_of("model_name_or_path: m\ndataset: a\neval_dataset: a\npredict_with_generate: true\n"), "");
  EXPECT_NE(error_of("model_name_or_path: m\ndataset: a\neval_dataset: a\npredict_with_generate: true\n"
                     "eval_strategy: steps\n").find("eval_loss only"), std::string::npos);
}

}  // namespace
