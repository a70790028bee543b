// Bad input through the whole config -> data -> model path (train_from_config):
// unknown and refused keys, an existing output_dir, an empty dataset, a tokenizer
// whose vocabulary does not fit the model. Uses the shipped tiny model folder.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "lf/common/remove_tree.h"
#include "lf/common/error.h"
#include "lf/config/train_config.h"
#include "lf/train/run_training.h"

namespace lf::train {
namespace {
namespace fs = std::filesystem;

class TrainErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lf_train_errors_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    lf::remove_tree(dir_);
    fs::create_directories(dir_ / "data");
    std::ofstream(dir_ / "data" / "dataset_info.json")
        << R"({"tiny": {"file_name": "tiny.json"}, "none": {"file_name": "none.json"}})";
    std::ofstream(dir_ / "data" / "tiny.json")
        << R"([{"instruction": "Say hi.", "input": "", "output": "hi"}, {"instruction": "Add 1 and 2.", "input": "", "output": "3"}])";
    std::ofstream(dir_ / "data" / "none.json") << "[]";
  }
  void TearDown() override { lf::remove_tree(dir_); }

  std::string yaml(const std::string& extra, const std::string& model = "") const {
    return "model_name_or_path: " + (model.empty() ? std::string(LF_SOURCE_DIR) + "/configs/models/tiny" : model) +
           "\ninit_weights: random\nstage: sft\nfinetuning_type: full\ndataset: tiny\ndataset_dir: " +
           (dir_ / "data").string() + "\ntemplate: qwen\ncutoff_len: 64\noutput_dir: " + (dir_ / "out").string() +
           "\nmax_steps: 2\nper_device_train_batch_size: 2\nlogging_steps: 1\nsave_strategy: \"no\"\n" + extra;
  }
  void run(const std::string& text, const std::vector<std::string>& overrides = {}) const {
    train_from_config(config::parse_train_config(text, overrides, "test.yaml"));
  }
  static std::string error_of(const std::function<void()>& f) {
    try {
      f();
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "(no ConfigError)";
  }

  fs::path dir_;
};

TEST_F(TrainErrors, TinyConfigTrains) {
  run(yaml(""));
  EXPECT_TRUE(fs::exists(dir_ / "out" / "trainer_log.jsonl"));
  EXPECT_TRUE(fs::exists(dir_ / "out" / "model.safetensors"));
  EXPECT_TRUE(fs::exists(dir_ / "out" / "tokenizer.json"));
}

TEST_F(TrainErrors, UnknownKey) {
  EXPECT_NE(error_of([&] { run(yaml("learning_rat: 1e-4\n")); }).find("learning_rate"), std::string::npos);
}

TEST_F(TrainErrors, RefusedKey) {
  EXPECT_NE(error_of([&] { run(yaml("quantization_bit: 4\n")); }).find("quantization_bit"), std::string::npos);
}

TEST_F(TrainErrors, OutputDirExists) {
  fs::create_directories(dir_ / "out");
  std::ofstream(dir_ / "out" / "keep.txt") << "an earlier run";
  const auto msg = error_of([&] { run(yaml("")); });
  EXPECT_NE(msg.find("overwrite_output_dir"), std::string::npos) << msg;
  EXPECT_TRUE(fs::exists(dir_ / "out" / "keep.txt"));
  EXPECT_NO_THROW(run(yaml("overwrite_output_dir: true\n")));
}

TEST_F(TrainErrors, EmptyDataset) {
  const auto msg = error_of([&] { run(yaml(""), {"dataset=none"}); });
  EXPECT_NE(msg.find("dataset none"), std::string::npos) << msg;
}

TEST_F(TrainErrors, VocabularyMismatch) {
  const fs::path model = dir_ / "small_vocab";
  fs::create_directories(model);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(fs::path(LF_SOURCE_DIR) / "configs/models/tiny" / f, model / f);
  std::ifstream in(fs::path(LF_SOURCE_DIR) / "configs/models/tiny/config.json");
  std::string cfg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto pos = cfg.find("\"vocab_size\"");
  ASSERT_NE(pos, std::string::npos);
  cfg.replace(pos, cfg.find(',', pos) - pos, "\"vocab_size\": 64");
  std::ofstream(model / "config.json") << cfg;
  const auto msg = error_of([&] { run(yaml("", model.string())); });
  EXPECT_NE(msg.find("vocab_size is 64"), std::string::npos) << msg;
}

}  // namespace
}  // namespace lf::train

namespace lf::train {
namespace {

// LLaMA-Factory's rule: a non-empty output_dir with checkpoints and overwrite_output_dir
// false resumes from the last checkpoint instead of refusing.
TEST_F(TrainErrors, ExistingCheckpointIsResumed) {
  run(yaml(""), {"save_strategy=steps", "save_steps=1"});
  ASSERT_TRUE(fs::exists(dir_ / "out" / "checkpoint-2" / "lf_trainer_state.json"));
  EXPECT_NO_THROW(run(yaml(""), {"save_strategy=steps", "save_steps=1", "max_steps=3"}));
  EXPECT_TRUE(fs::exists(dir_ / "out" / "checkpoint-3"));
}

}  // namespace
}  // namespace lf::train
