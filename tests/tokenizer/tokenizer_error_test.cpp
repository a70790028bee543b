// Bad input: each failure is a ConfigError that names the file and the problem.
#include <gtest/gtest.h>

#include <fstream>

#include "lf/common/error.h"
#include "test_assets.h"

namespace lf {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("lf_tok_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }

std::string error_of(const fs::path& p) {
  try {
    Tokenizer::load(p);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(TokenizerErrors, MissingFilesNameTheFolderAndWhatToTry) {
  fs::path d = temp_dir("missing");
  std::string msg = error_of(d);
  EXPECT_NE(msg.find("no tokenizer found"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tokenizer.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find(d.string()), std::string::npos) << msg;
  EXPECT_NE(error_of(d / "nope").find("does not exist"), std::string::npos);
}

TEST(TokenizerErrors, UnsupportedModelTypeIsNamed) {
  fs::path d = temp_dir("unigram");
  write(d / "tokenizer.json", R"({"model": {"type": "Unigram", "vocab": [["a", 0.0]]}})");
  std::string msg = error_of(d);
  EXPECT_NE(msg.find("'Unigram'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("BPE"), std::string::npos) << msg;
}

TEST(TokenizerErrors, UnsupportedPreTokenizerIsNamed) {
  fs::path d = temp_dir("pretok");
  write(d / "tokenizer.json",
        R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
            "pre_tokenizer": {"type": "BertPreTokenizer"}})");
  EXPECT_NE(error_of(d).find("'BertPreTokenizer'"), std::string::npos);
}

TEST(TokenizerErrors, MalformedJsonNamesTheFile) {
  fs::path d = temp_dir("badjson");
  write(d / "tokenizer.json", "{\"model\": ");
  std::string msg = error_of(d);
  EXPECT_NE(msg.find("is not valid JSON"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tokenizer.json"), std::string::npos) << msg;
}

TEST(TokenizerErrors, MergeOutsideVocabulary) {
  fs::path d = temp_dir("badmerge");
  write(d / "tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}})");
  EXPECT_NE(error_of(d).find("not in the vocabulary"), std::string::npos);
}

TEST(TokenizerErrors, InvalidUtf8TextIsRejected) {
  fs::path d = temp_dir("tiny");
  write(d / "tokenizer.json",
        R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}})");
  Tokenizer tok = Tokenizer::load(d);
  EXPECT_EQ(tok.encode("abab"), (std::vector<int32_t>{2, 2}));
  EXPECT_THROW(tok.encode("a\xff"), ConfigError);
}

}  // namespace
}  // namespace lf
