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
  // Named with its file, before the val_size split could call it "no training examples out of 0".
  EXPECT_NE(msg.find("dataset 'none' is empty: "), std::string::npos) << msg;
  EXPECT_NE(msg.find("none.json holds no records"), std::string::npos) << msg;
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

namespace lf::train {
namespace {

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The steps of trainer_log.jsonl's lines, in order (a resumed run appends its own).
std::vector<int> logged_steps(const fs::path& log) {
  std::ifstream in(log);
  std::vector<int> steps;
  for (std::string line; std::getline(in, line);)
    steps.push_back(std::stoi(line.substr(line.find("\"current_steps\":") + 16)));
  return steps;
}

// DESIGN principle 4: a checkpoint carries a manifest of its files' sizes and XXH64, written
// (and synced) before the folder is renamed into place; a resume refuses a checkpoint whose
// files differ from it, naming the file, instead of loading it.
TEST_F(TrainErrors, ADamagedCheckpointIsRefusedNamingTheFile) {
  run(yaml(""), {"save_strategy=steps", "save_steps=1"});
  const auto ckpt = dir_ / "out" / "checkpoint-2";
  const auto manifest = read_text(ckpt / "lf_manifest.json");
  for (const char* f : {"model.safetensors", "optimizer.safetensors", "rng_state.safetensors",
                        "lf_trainer_state.json", "trainer_state.json"})
    EXPECT_NE(manifest.find(std::string("\"") + f + "\""), std::string::npos) << f << "\n" << manifest;
  // Each damage on a fresh copy of the checkpoint; the error of resuming from it.
  auto resume_error = [&](const std::function<void(const fs::path&)>& damage) {
    const auto copy = dir_ / "damaged";
    lf::remove_tree(copy);
    lf::remove_tree(dir_ / "again");
    fs::copy(ckpt, copy, fs::copy_options::recursive);
    damage(copy);
    return error_of([&] {
      run(yaml(""), {"resume_from_checkpoint=" + copy.string(), "max_steps=3", "output_dir=" + (dir_ / "again").string()});
    });
  };
  EXPECT_EQ(resume_error([](const fs::path&) {}), "(no ConfigError)") << "an intact checkpoint resumes";
  // One byte flipped in the middle of the weights: the same size, a different checksum.
  auto e = resume_error([](const fs::path& d) {
    const auto weights = d / "model.safetensors";
    const auto middle = static_cast<std::streamoff>(fs::file_size(weights) / 2);
    std::fstream f(weights, std::ios::in | std::ios::out | std::ios::binary);
    char c = 0;
    f.seekg(middle);
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x10);
    f.seekp(middle);
    f.write(&c, 1);
  });
  EXPECT_NE(e.find("is damaged: model.safetensors does not match its checksum"), std::string::npos) << e;
  e = resume_error([](const fs::path& d) { fs::resize_file(d / "optimizer.safetensors", 100); });
  EXPECT_NE(e.find("optimizer.safetensors has 100 bytes, the manifest says"), std::string::npos) << e;
  e = resume_error([](const fs::path& d) { fs::remove(d / "rng_state.safetensors"); });
  EXPECT_NE(e.find("rng_state.safetensors is missing"), std::string::npos) << e;
}

// Resuming from output_dir (overwrite_output_dir false) passes over a damaged newest
// checkpoint for the one before it.
TEST_F(TrainErrors, AutomaticResumePassesOverADamagedNewestCheckpoint) {
  run(yaml(""), {"save_strategy=steps", "save_steps=1"});
  const size_t first_run_lines = logged_steps(dir_ / "out" / "trainer_log.jsonl").size();
  fs::resize_file(dir_ / "out" / "checkpoint-2" / "model.safetensors", 10);
  run(yaml("overwrite_output_dir: false\n"), {"save_strategy=steps", "save_steps=1", "max_steps=3"});
  // The resumed run appends its lines: from checkpoint-1, its first is step 2.
  const auto steps = logged_steps(dir_ / "out" / "trainer_log.jsonl");
  ASSERT_GT(steps.size(), first_run_lines);
  EXPECT_EQ(steps[first_run_lines], 2);
  EXPECT_TRUE(fs::exists(dir_ / "out" / "checkpoint-3" / "lf_manifest.json"));
}

}  // namespace
}  // namespace lf::train
