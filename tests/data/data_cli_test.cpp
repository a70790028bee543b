// The `tokenize` and `preview` subcommands through a real process (lf_data_cli
// links exactly what lf-train links).
#include <cstdio>

#include "data_test_util.h"

namespace lf {
namespace {

namespace fs = std::filesystem;

std::string run(const std::string& cmd, int* status = nullptr) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int st = ::pclose(p);
  if (status) *status = WEXITSTATUS(st);
  return out;
}

TEST(DataCli, TokenizeAndDecodeRoundTripInOrder) {
  LF_REQUIRE_ASSETS();
  fs::path dir = test::temp_dir("cli");
  test::write_file(dir / "in.jsonl", "{\"text\": \"Hello world\"}\n{\"text\": \"<|im_start|>hi\"}\n");
  const std::string tok = (test::assets_dir() / "qwen2").string();
  std::string out = run(std::string(LF_DATA_CLI) + " tokenize --tokenizer " + tok + " < " +
                        (dir / "in.jsonl").string());
  EXPECT_EQ(out, "{\"ids\": [9707, 1879]}\n{\"ids\": [151644, 6023]}\n");
  test::write_file(dir / "ids.jsonl", out);
  std::string text = run(std::string(LF_DATA_CLI) + " tokenize --decode --tokenizer " + tok + " < " +
                         (dir / "ids.jsonl").string());
  EXPECT_EQ(text, "{\"text\":\"Hello world\"}\n{\"text\":\"<|im_start|>hi\"}\n");
}

TEST(DataCli, TokenizeFlavorSelectsTransformersIds) {
  LF_REQUIRE_ASSETS();
  fs::path dir = test::temp_dir("cliflavor");
  test::write_file(dir / "in.jsonl", "{\"text\": \"a </s> and\"}\n");
  const std::string base = std::string(LF_DATA_CLI) + " tokenize --tokenizer " +
                           (test::assets_dir() / "mistral").string() + " < " + (dir / "in.jsonl").string();
  EXPECT_EQ(run(base), "{\"ids\": [264, 28705, 2, 28705, 304]}\n");
  EXPECT_EQ(run(base + " --flavor transformers"), "{\"ids\": [264, 28705, 2, 304]}\n");
}

TEST(DataCli, TokenizeReportsBadLine) {
  LF_REQUIRE_ASSETS();
  fs::path dir = test::temp_dir("clibad");
  test::write_file(dir / "in.jsonl", "{\"text\": \"ok\"}\n{\"text\": 3}\n");
  int status = 0;
  std::string err = run(std::string(LF_DATA_CLI) + " tokenize --tokenizer " +
                            (test::assets_dir() / "qwen2").string() + " < " + (dir / "in.jsonl").string() +
                            " 2>&1 >/dev/null",
                        &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(err.find("stdin:2"), std::string::npos) << err;
}

TEST(DataCli, PreviewMarksMaskedSpans) {
  LF_REQUIRE_ASSETS();
  fs::path dir = test::temp_dir("preview");
  test::write_file(dir / "c.yaml", "model_name_or_path: " + (test::assets_dir() / "qwen2").string() +
                                       "\ndataset: alpaca_samples\ndataset_dir: " +
                                       (test::fixtures_dir() / "data").string() +
                                       "\ntemplate: qwen\ncutoff_len: 1024\n");
  std::string out = run(std::string(LF_DATA_CLI) + " preview " + (dir / "c.yaml").string() + " --n 2");
  EXPECT_NE(out.find("=== sample 0"), std::string::npos) << out;
  EXPECT_NE(out.find("=== sample 1"), std::string::npos) << out;
  EXPECT_EQ(out.find("=== sample 2"), std::string::npos) << out;
  EXPECT_NE(out.find("[[MASKED]]<|im_start|>system\nYou are Qwen"), std::string::npos) << out;
  EXPECT_NE(out.find("[[/MASKED]]1. Eat a balanced diet."), std::string::npos) << out;
}

// The project's own tiny tokenizer (configs/models/tiny): no shared assets needed.
fs::path tiny_model() { return fs::path(LF_SOURCE_DIR) / "configs" / "models" / "tiny"; }

std::string tiny_config(const fs::path& dir, const std::string& records) {
  test::write_file(dir / "data.jsonl", records);
  test::write_file(dir / "dataset_info.json", R"({"mine": {"file_name": "data.jsonl"}})");
  test::write_file(dir / "c.yaml", "model_name_or_path: " + tiny_model().string() + "\ndataset: mine\ndataset_dir: " +
                                       dir.string() + "\ntemplate: qwen\ncutoff_len: 64\n");
  return (dir / "c.yaml").string();
}

TEST(DataCli, DecodeRefusesAnIdOutsideTheVocabulary) {
  fs::path dir = test::temp_dir("clioov");
  test::write_file(dir / "ids.jsonl", "{\"ids\": [5, 6]}\n{\"ids\": [5, 999999]}\n");
  int status = 0;
  std::string err = run(std::string(LF_DATA_CLI) + " tokenize --decode --tokenizer " + tiny_model().string() + " < " +
                            (dir / "ids.jsonl").string() + " 2>&1 >/dev/null",
                        &status);
  EXPECT_EQ(status, 2) << err;
  EXPECT_NE(err.find("stdin:2: id 999999 (position 1) is not in the vocabulary"), std::string::npos) << err;
}

// preview runs the checks training runs: a malformed record past the shown ones, an empty dataset.
TEST(DataCli, PreviewRefusesWhatTrainingRefuses) {
  fs::path dir = test::temp_dir("clipreviewbad");
  std::string good = "{\"instruction\": \"a\", \"output\": \"b\"}\n";
  int status = 0;
  std::string err = run(std::string(LF_DATA_CLI) + " preview " + tiny_config(dir, good + good + good + "{oops\n") +
                            " --n 1 2>&1 >/dev/null",
                        &status);
  EXPECT_EQ(status, 2) << err;
  EXPECT_NE(err.find("data.jsonl:4: malformed JSON record"), std::string::npos) << err;
  err = run(std::string(LF_DATA_CLI) + " preview " + tiny_config(dir, "") + " 2>&1 >/dev/null", &status);
  EXPECT_EQ(status, 2) << err;
  EXPECT_NE(err.find("dataset 'mine' is empty"), std::string::npos) << err;
}

// Tokenizing a large dataset says how far it got (plain lines: stderr is not a terminal here).
TEST(DataCli, TokenizingALargeDatasetShowsProgress) {
  fs::path dir = test::temp_dir("cliprogress");
  std::string records;
  for (int i = 0; i < 6000; ++i) records += "{\"instruction\": \"count " + std::to_string(i) + "\", \"output\": \"ok\"}\n";
  int status = 0;
  std::string err = run(std::string(LF_DATA_CLI) + " preview " + tiny_config(dir, records) + " --n 1 2>&1 >/dev/null",
                        &status);
  EXPECT_EQ(status, 0) << err;
  EXPECT_NE(err.find("tokenizing: 100% (6000 of 6000 examples"), std::string::npos) << err;
  size_t lines = 0;
  for (size_t at = 0; (at = err.find("tokenizing: ", at)) != std::string::npos; ++at) ++lines;
  EXPECT_GE(lines, 5u) << err;  // a line every 10% (threads may fold two deciles into one)
  EXPECT_NE(err.find("left)"), std::string::npos) << err;
}

}  // namespace
}  // namespace lf
