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

namespace lf {
namespace {

// Reference ids from PyPI `tokenizers` 0.22 for the same tokenizer.json:
// unknown chars, fuse_unk, and byte_fallback interleaving (HF emits a pending
// unk only when the next known char arrives, even across byte-fallback bytes).
TEST(TokenizerUnk, FuseUnkAndByteFallbackOrderMatchHf) {
  for (bool fuse : {true, false}) {
    fs::path d = temp_dir(fuse ? "unk_fuse" : "unk_nofuse");
    write(d / "tokenizer.json",
          std::string(R"({"model": {"type": "BPE", "vocab": {"<unk>": 0, "a": 1, "b": 2, "ab": 3, "<0x78>": 4},
              "merges": ["a b"], "unk_token": "<unk>", "byte_fallback": true, "fuse_unk": )") +
              (fuse ? "true" : "false") + "}}");
    Tokenizer tok = Tokenizer::load(d);
    if (fuse) {
      EXPECT_EQ(tok.encode("axyzbab"), (std::vector<int32_t>{1, 4, 0, 2, 3}));
      EXPECT_EQ(tok.encode("yyxyab"), (std::vector<int32_t>{4, 0, 3}));
    } else {
      EXPECT_EQ(tok.encode("axyzbab"), (std::vector<int32_t>{1, 4, 0, 0, 2, 3}));
      EXPECT_EQ(tok.encode("yyxyab"), (std::vector<int32_t>{0, 4, 0, 0, 3}));
    }
  }
}

}  // namespace
}  // namespace lf
