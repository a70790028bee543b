// Bad input: each is a ConfigError naming where (file:line) and what to try.
#include "lf/config/train_config.h"
#include "data_test_util.h"
#include "lf/common/error.h"
#include "lf/data/chat_template.h"
#include "lf/data/data_args.h"
#include "lf/data/sft_dataset.h"

namespace lf {
namespace {

namespace fs = std::filesystem;

struct BadData : ::testing::Test {
  fs::path dir;
  DataArgs args;
  void SetUp() override {
    dir = test::temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    test::write_file(dir / "dataset_info.json", R"({
      "alp": {"file_name": "alp.jsonl"},
      "sg": {"file_name": "sg.jsonl", "formatting": "sharegpt"},
      "pq": {"file_name": "shards"},
      "hub": {"hf_hub_url": "someone/data"}
    })");
    args.dataset_dir = dir.string();
    args.template_name = "qwen";
  }
  std::string error_of(const std::vector<std::string>& names) {
    try {
      load_examples(args, names);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(BadData, UnknownDatasetListsKnownOnes) {
  std::string msg = error_of({"alpaca_en"});
  EXPECT_NE(msg.find("'alpaca_en' is not defined"), std::string::npos) << msg;
  EXPECT_NE(msg.find("alp, hub, pq, sg"), std::string::npos) << msg;
}

TEST_F(BadData, HubDatasetsAreRefusedOffline) {
  EXPECT_NE(error_of({"hub"}).find("hf_hub_url"), std::string::npos);
}

TEST_F(BadData, MalformedJsonLineGivesFileLineAndParseError) {
  test::write_file(dir / "alp.jsonl", "{\"instruction\": \"a\", \"output\": \"b\"}\n\n{\"instruction\": \"a\", \"output\": }\n");
  std::string msg = error_of({"alp"});
  EXPECT_NE(msg.find("alp.jsonl:3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("malformed JSON"), std::string::npos) << msg;
  EXPECT_NE(msg.find("parse error"), std::string::npos) << msg;
}

TEST_F(BadData, RecordMissingRequiredColumn) {
  test::write_file(dir / "alp.jsonl", "{\"instruction\": \"a\", \"output\": \"b\"}\n{\"instruction\": \"a\"}\n");
  std::string msg = error_of({"alp"});
  EXPECT_NE(msg.find("alp.jsonl:2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no 'output' column"), std::string::npos) << msg;
}

TEST_F(BadData, EmptyDatasetAfterFiltering) {
  test::write_file(dir / "alp.jsonl", "{\"instruction\": \"a\", \"output\": null}\n");
  args.dataset = {"alp"};
  args.model_name_or_path = (test::assets_dir() / "qwen2").string();
  LF_REQUIRE_ASSETS();
  try {
    load_sft_data(args, load_tokenizer_for(args));
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no usable training example"), std::string::npos) << e.what();
  }
}

TEST_F(BadData, SharegptRolesOutOfOrder) {
  test::write_file(dir / "sg.jsonl",
                   R"({"conversations": [{"from": "human", "value": "a"}, {"from": "human", "value": "b"}]})"
                   "\n");
  std::string msg = error_of({"sg"});
  EXPECT_NE(msg.find("sg.jsonl:1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("role 'human' where an assistant turn was expected"), std::string::npos) << msg;
}

TEST_F(BadData, SharegptConversationEndingWithUser) {
  test::write_file(dir / "sg.jsonl", R"({"conversations": [{"from": "human", "value": "a"}]})" "\n");
  EXPECT_NE(error_of({"sg"}).find("must end with an assistant turn"), std::string::npos);
}

#ifndef LF_HAVE_PARQUET
TEST_F(BadData, ParquetNeedsTheBuildOption) {
  fs::create_directories(dir / "shards");
  test::write_file(dir / "shards" / "part-00000.parquet", "PAR1");
  std::string msg = error_of({"pq"});
  EXPECT_NE(msg.find("LF_WITH_PARQUET"), std::string::npos) << msg;
}
#else
TEST_F(BadData, CorruptParquetShardIsNamed) {
  fs::create_directories(dir / "shards");
  test::write_file(dir / "shards" / "part-00000.parquet", "PAR1 not really");
  std::string msg = error_of({"pq"});
  EXPECT_NE(msg.find("part-00000.parquet"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Parquet"), std::string::npos) << msg;
}
#endif

TEST_F(BadData, MissingDataFile) {
  EXPECT_NE(error_of({"alp"}).find("not found"), std::string::npos);
}

// An empty file is named as such (it once read "val_size 0.05 leaves no training examples out of 0").
TEST_F(BadData, EmptyDatasetIsNamedWithItsFile) {
  test::write_file(dir / "alp.jsonl", "\n\n");
  std::string msg = error_of({"alp"});
  EXPECT_NE(msg.find("dataset 'alp' is empty: " + (dir / "alp.jsonl").string() + " holds no records"),
            std::string::npos)
      << msg;
}

// The dataset/train/part-*.parquet layout: file_name names the folder of part files; a folder
// holding only subfolders says which ones it found.
TEST_F(BadData, FolderWithOnlySubfoldersNamesThem) {
  fs::create_directories(dir / "shards" / "train");
  fs::create_directories(dir / "shards" / "test");
  std::string msg = error_of({"pq"});
  EXPECT_NE(msg.find("holds no files, only the folder(s) test, train"), std::string::npos) << msg;
  EXPECT_NE(msg.find((dir / "shards" / "test").string()), std::string::npos) << msg;
}

TEST_F(BadData, FolderOfPartFilesIsOneDataset) {
  fs::create_directories(dir / "shards");
  test::write_file(dir / "shards" / "part-00000.jsonl", "{\"instruction\": \"a\", \"output\": \"b\"}\n");
  test::write_file(dir / "shards" / "part-00001.jsonl", "{\"instruction\": \"c\", \"output\": \"d\"}\n");
  auto ex = load_examples(args, {"pq"});
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_NE(ex[1].origin.find("part-00001.jsonl:1"), std::string::npos) << ex[1].origin;
}

TEST(BadConfig, WrongTypeNamesKeyAndLine) {
  fs::path dir = test::temp_dir("badyaml");
  test::write_file(dir / "c.yaml", "dataset: a\ncutoff_len: lots\n");
  try {
    config::load_train_config((dir / "c.yaml").string(), {});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("c.yaml:2: `cutoff_len` must be an integer, got 'lots'"),
              std::string::npos)
        << e.what();
  }
}

TEST(BadConfig, UnknownTemplateListsKnownOnes) {
  LF_REQUIRE_ASSETS();
  try {
    ChatTemplate("qwen9", test::data_tokenizer("qwen2"));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'qwen'?"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("llama3"), std::string::npos) << e.what();
  }
}

TEST(BadConfig, MissingTokenizerFolder) {
  DataArgs a;
  a.model_name_or_path = test::temp_dir("notok").string();
  EXPECT_THROW(load_tokenizer_for(a), ConfigError);
}

}  // namespace
}  // namespace lf
