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

}  // namespace
}  // namespace lf
