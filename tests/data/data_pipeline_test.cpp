// The SFT data path end to end: dataset mixing, max_samples, val_size, the
// tokenized cache (hit, and miss when an argument or file changes), YAML keys.
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include "data_test_util.h"
#include "lf/common/error.h"
#include "lf/data/chat_template.h"
#include "lf/config/train_config.h"
#include "lf/data/data_args.h"
#include "lf/data/sft_dataset.h"
#include "record_reader.h"

namespace lf {
namespace {

namespace fs = std::filesystem;

DataArgs fixture_args(const std::string& datasets) {
  DataArgs a = config::parse_train_config("model_name_or_path: m\ndataset: " + datasets +
                                              "\ntemplate: qwen\ncutoff_len: 256\n", {}, "test.yaml")
                   .plan.data;
  a.dataset_dir = (test::fixtures_dir() / "data").string();
  a.model_name_or_path = (test::assets_dir() / "qwen2").string();
  return a;
}

TEST(DataPipeline, DatasetListIsConcatenatedInOrder) {
  LF_REQUIRE_ASSETS();
  DataArgs a = fixture_args("alpaca_samples, sharegpt_samples");
  ASSERT_EQ(a.dataset, (std::vector<std::string>{"alpaca_samples", "sharegpt_samples"}));
  auto examples = load_examples(a, a.dataset);
  ASSERT_EQ(examples.size(), 16u);
  EXPECT_NE(examples[0].origin.find("alpaca_samples.json:2"), std::string::npos) << examples[0].origin;
  EXPECT_NE(examples[10].origin.find("sharegpt_samples.jsonl:1"), std::string::npos);
  EXPECT_EQ(examples[11].system, "You are a pirate.");
  EXPECT_EQ(examples[12].prompt.size(), 5u);
}

TEST(DataPipeline, MaxSamplesAppliesPerDataset) {
  LF_REQUIRE_ASSETS();
  DataArgs a = fixture_args("alpaca_samples,sharegpt_samples");
  a.max_samples = 3;
  EXPECT_EQ(load_examples(a, a.dataset).size(), 6u);
}

TEST(DataPipeline, ValSizeSplitsAndCacheIsReusedUntilInputsChange) {
  LF_REQUIRE_ASSETS();
  fs::path dir = test::temp_dir("cache");
  DataArgs a = fixture_args("alpaca_samples");
  a.val_size = 0.2;
  a.tokenized_path = (dir / "tok").string();
  Tokenizer tok = load_tokenizer_for(a);
  SftData first = load_sft_data(a, tok);
  EXPECT_FALSE(first.from_cache);
  EXPECT_EQ(first.train.size(), 8u);
  EXPECT_EQ(first.eval.size(), 2u);
  ASSERT_TRUE(fs::exists(dir / "tok" / "train.lftok"));

  SftData second = load_sft_data(a, tok);
  EXPECT_TRUE(second.from_cache);
  ASSERT_EQ(second.train.size(), first.train.size());
  EXPECT_EQ(second.train.num_tokens(), first.train.num_tokens());
  for (size_t i = 0; i < first.train.size(); ++i) {
    auto x = first.train.input_ids(i), y = second.train.input_ids(i);
    ASSERT_TRUE(std::equal(x.begin(), x.end(), y.begin(), y.end())) << i;
    auto lx = first.train.labels(i), ly = second.train.labels(i);
    ASSERT_TRUE(std::equal(lx.begin(), lx.end(), ly.begin(), ly.end())) << i;
  }
  a.cutoff_len = 64;  // another cutoff_len is another key
  SftData third = load_sft_data(a, tok);
  EXPECT_FALSE(third.from_cache);
  for (size_t i = 0; i < third.train.size(); ++i) EXPECT_LE(third.train.input_ids(i).size(), 64u);
  EXPECT_TRUE(load_sft_data(a, tok).from_cache);
}

TEST(DataPipeline, CacheKeyCoversFileContents) {
  LF_REQUIRE_ASSETS();
  fs::path dir = test::temp_dir("filekey");
  fs::copy(test::fixtures_dir() / "data", dir / "data");
  DataArgs a = fixture_args("sharegpt_samples");
  a.dataset_dir = (dir / "data").string();
  Tokenizer tok = load_tokenizer_for(a);
  uint64_t k1 = sft_cache_key(a, tok);
  std::ofstream(dir / "data" / "sharegpt_samples.jsonl", std::ios::app)
      << R"({"conversations": [{"from": "human", "value": "x"}, {"from": "gpt", "value": "y"}]})" << "\n";
  EXPECT_NE(k1, sft_cache_key(a, tok));
  a.template_name = "default";
  EXPECT_NE(sft_cache_key(a, tok), k1);
}

TEST(DataPipeline, PackingFillsCutoffPlusOne) {
  LF_REQUIRE_ASSETS();
  DataArgs a = fixture_args("alpaca_samples,sharegpt_samples");
  a.packing = true;
  a.cutoff_len = 512;
  Tokenizer tok = load_tokenizer_for(a);
  SftData d = load_sft_data(a, tok);
  ASSERT_GT(d.train.size(), 0u);
  ASSERT_LT(d.train.size(), 16u);
  for (size_t i = 0; i < d.train.size(); ++i) EXPECT_EQ(d.train.input_ids(i).size(), 513u);
}

// Packed rows record each token's sequence (1, 2, ... in the pack, 0 for padding: LLaMA-Factory's
// positions restart there); neat_packing makes the same packs, marked neat (its attention_mask with
// indices); both kept by the cache, neat_packing in its key.
TEST(DataPipeline, NeatPackingRecordsSegmentsAndCachesThem) {
  LF_REQUIRE_ASSETS();
  fs::path dir = test::temp_dir("neat");
  DataArgs plain = fixture_args("alpaca_samples,sharegpt_samples");
  plain.packing = true;
  plain.cutoff_len = 512;
  DataArgs neat = plain;  // neat_packing implies packing: the plan's rule (Config.PackingCutoff)
  neat.neat_packing = true;
  neat.tokenized_path = (dir / "tok").string();
  Tokenizer tok = load_tokenizer_for(plain);
  EXPECT_NE(sft_cache_key(plain, tok), sft_cache_key(neat, tok));
  const SftData p = load_sft_data(plain, tok), n = load_sft_data(neat, tok);
  ASSERT_TRUE(p.train.has_segments() && n.train.has_segments());
  EXPECT_FALSE(p.train.neat());
  EXPECT_TRUE(n.train.neat());
  ASSERT_EQ(n.train.size(), p.train.size());
  size_t multi = 0;
  for (size_t i = 0; i < n.train.size(); ++i) {
    const auto ids = n.train.input_ids(i), pids = p.train.input_ids(i), seg = n.train.segment_ids(i);
    const auto pseg = p.train.segment_ids(i);
    ASSERT_TRUE(std::equal(ids.begin(), ids.end(), pids.begin(), pids.end())) << "same packs as packing: true";
    ASSERT_TRUE(std::equal(seg.begin(), seg.end(), pseg.begin(), pseg.end())) << "same sequences";
    ASSERT_EQ(seg.size(), ids.size());
    EXPECT_EQ(seg[0], 1);
    for (size_t j = 1; j < seg.size(); ++j) {
      EXPECT_TRUE(seg[j] == seg[j - 1] || seg[j] == seg[j - 1] + 1 || seg[j] == 0) << i << ":" << j;
      if (seg[j - 1] == 0) EXPECT_EQ(seg[j], 0) << "padding (segment 0) only at the end";
    }
    multi += seg[seg.size() - 1] > 1 || (seg[seg.size() - 1] == 0 && *std::max_element(seg.begin(), seg.end()) > 1);
  }
  EXPECT_GT(multi, 0u) << "the test needs packs of several sequences";
  const SftData cached = load_sft_data(neat, tok);
  ASSERT_TRUE(cached.from_cache && cached.train.has_segments() && cached.train.neat());
  for (size_t i = 0; i < n.train.size(); ++i) {
    const auto a = n.train.segment_ids(i), b = cached.train.segment_ids(i);
    ASSERT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end())) << i;
  }
}

TEST(DataPipeline, JsonArraySplitterKeepsLinesAndNesting) {
  fs::path dir = test::temp_dir("split");
  test::write_file(dir / "a.json",
                   "[\n  {\"a\": \"x, ] } [\", \"b\": [1, {\"c\": 2}]},\n\n  {\"a\": \"\\\"q\\\"\"}\n]\n");
  DataFile df = read_data_file(dir / "a.json");
  ASSERT_EQ(df.records.size(), 2u);
  EXPECT_EQ(df.records[0].line, 2);
  EXPECT_EQ(df.records[1].line, 4);
  EXPECT_EQ(df.text.substr(df.records[1].begin, df.records[1].end - df.records[1].begin),
            "{\"a\": \"\\\"q\\\"\"}");
}

TEST(DataPipeline, ByteOrderMarkAndCrlfAreAccepted) {
  fs::path dir = test::temp_dir("bom");
  test::write_file(dir / "a.json", "\xEF\xBB\xBF[\r\n {\"a\": 1},\r\n {\"a\": 2}\r\n]\r\n");
  test::write_file(dir / "b.jsonl", "\xEF\xBB\xBF{\"a\": 1}\r\n{\"a\": 2}\r\n");
  for (const char* f : {"a.json", "b.jsonl"}) {
    DataFile df = read_data_file(dir / f);
    ASSERT_EQ(df.records.size(), 2u) << f;
    for (const auto& r : df.records) {
      nlohmann::json parsed;
      EXPECT_NO_THROW(parsed = nlohmann::json::parse(df.text.substr(r.begin, r.end - r.begin))) << f;
      EXPECT_TRUE(parsed.contains("a")) << f;
    }
  }
}

TEST(DataPipeline, YamlKeysAndOverrides) {
  fs::path dir = test::temp_dir("yaml");
  test::write_file(dir / "c.yaml",
                   "model_name_or_path: /m\nstage: sft\ndataset: a,b\ntemplate: llama3\ncutoff_len: 1024\n"
                   "train_on_prompt: true\nmax_samples: 100\nval_size: 0.1\nlearning_rate: 1.0e-4\n");
  DataArgs a = config::load_train_config((dir / "c.yaml").string(), {"cutoff_len=77", "packing=true"}).plan.data;
  EXPECT_EQ(a.dataset, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(a.template_name, "llama3");
  EXPECT_EQ(a.cutoff_len, 76);  // packing: LLaMA-Factory packs into cutoff_len - 1 (Config.PackingCutoff)
  EXPECT_TRUE(a.packing);
  EXPECT_TRUE(a.train_on_prompt);
  EXPECT_EQ(a.max_samples, 100);
  EXPECT_DOUBLE_EQ(a.val_size, 0.1);
  EXPECT_EQ(a.model_name_or_path, "/m");
}

TEST(DataPipeline, TemplatesResolveSpecialTokensLikeLlamaFactory) {
  LF_REQUIRE_ASSETS();
  ChatTemplate llama3("llama3", test::data_tokenizer("llama3"));
  EXPECT_EQ(llama3.eos_id(), 128009);  // replace_eos -> <|eot_id|>
  ChatTemplate empty("empty", test::data_tokenizer("llama3"));
  EXPECT_EQ(empty.eos_id(), 128001);
  EXPECT_EQ(empty.pad_id(), 128001);  // pad falls back to eos
  ChatTemplate qwen("qwen", test::data_tokenizer("qwen2"));
  EXPECT_EQ(qwen.pad_id(), 151643);
}

}  // namespace
}  // namespace lf

#include <fstream>
#include <nlohmann/json.hpp>

#include "numpy_random.h"

namespace lf {
namespace {

// numpy_permutation.json: np.random.default_rng(seed).permutation(n)[:20] from numpy 2.4.
TEST(DataPipeline, NumpyPermutationIsBitExact) {
  std::ifstream in(test::fixtures_dir() / "data" / "numpy_permutation.json");
  auto cases = nlohmann::json::parse(in);
  ASSERT_GE(cases.size(), 4u);
  for (const auto& c : cases) {
    auto perm = numpy_permutation(c["seed"].get<uint64_t>(), c["n"].get<size_t>());
    auto head = c["head"].get<std::vector<size_t>>();
    EXPECT_TRUE(std::equal(head.begin(), head.end(), perm.begin())) << c.dump();
  }
}

TEST(DataPipeline, ValSizeTakesNumpysFirstIndicesAsEval) {
  LF_REQUIRE_ASSETS();
  DataArgs a = fixture_args("alpaca_samples");
  a.val_size = 0.3;  // ceil(0.3 * 10) = 3
  auto all = load_examples(a, a.dataset);
  SftData d = load_sft_data(a, load_tokenizer_for(a));
  ASSERT_EQ(d.eval.size(), 3u);
  ASSERT_EQ(d.train.size(), 7u);
  auto perm = numpy_permutation(42, 10);
  ChatTemplate tmpl("qwen", load_tokenizer_for(a));
  auto enc = encode_examples({all[perm[0]]}, tmpl, a);
  auto got = d.eval.input_ids(0);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), enc[0].input_ids.begin(), enc[0].input_ids.end()));
}

}  // namespace
}  // namespace lf

#ifdef LF_HAVE_PARQUET
namespace lf {
namespace {

void expect_same_examples(const std::vector<Example>& a, const std::vector<Example>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].system, b[i].system) << i;
    ASSERT_EQ(a[i].prompt.size(), b[i].prompt.size()) << i;
    for (size_t k = 0; k < a[i].prompt.size(); ++k) {
      EXPECT_EQ(a[i].prompt[k].content, b[i].prompt[k].content) << i;
      EXPECT_EQ(a[i].prompt[k].role, b[i].prompt[k].role) << i;
    }
    ASSERT_EQ(a[i].response.size(), b[i].response.size()) << i;
    if (!a[i].response.empty()) {
      EXPECT_EQ(a[i].response[0].content, b[i].response[0].content) << i;
    }
  }
}

// Parquet shards (folder of part-*.parquet) and single files read to the same
// examples as their JSON twins.
TEST(DataParquet, ShardsAndFilesMatchJson) {
  LF_REQUIRE_ASSETS();
  DataArgs a = fixture_args("alpaca_samples");
  expect_same_examples(load_examples(a, {"alpaca_samples_parquet"}), load_examples(a, {"alpaca_samples"}));
  expect_same_examples(load_examples(a, {"sharegpt_samples_parquet"}),
                       load_examples(a, {"sharegpt_samples"}));
  auto ex = load_examples(a, {"alpaca_samples_parquet"});
  EXPECT_NE(ex[6].origin.find("part-00001.parquet:row 1"), std::string::npos) << ex[6].origin;
}

}  // namespace
}  // namespace lf
#endif

#include <thread>

namespace lf {
namespace {

TEST(DataPipeline, ConcurrentLoadersTokenizeOnceAndShareTheCache) {
  LF_REQUIRE_ASSETS();
  fs::path dir = test::temp_dir("lock");
  DataArgs a = fixture_args("alpaca_samples,sharegpt_samples");
  a.tokenized_path = (dir / "tok").string();
  Tokenizer tok = load_tokenizer_for(a);
  SftData r1, r2;
  std::thread t1([&] { r1 = load_sft_data(a, tok); });
  std::thread t2([&] { r2 = load_sft_data(a, tok); });
  t1.join();
  t2.join();
  EXPECT_NE(r1.from_cache, r2.from_cache);  // exactly one tokenized
  EXPECT_EQ(r1.train.num_tokens(), r2.train.num_tokens());
  EXPECT_EQ(r1.pad_id, 151643);
  EXPECT_EQ(r2.eos_id, 151645);
}

// `template:` unset (issue 34): the tokenizer's Jinja chat template is parsed as LLaMA-Factory's parse_template does
// (the slots themselves: tests/data/jinja_test.cpp against LLaMA-Factory). Qwen3's chat template parses into a reasoning
// template that encodes a conversation as LLaMA-Factory's own `qwen3` template does; pt needs no template.
TEST(DataPipeline, UnsetTemplateParsesTheTokenizersChatTemplate) {
  LF_REQUIRE_ASSETS();
  DataArgs a = fixture_args("alpaca_samples");
  a.template_name.clear();
  const auto tok = load_tokenizer_for(a);
  ASSERT_TRUE(tok.chat_template().has_value());
  const ChatTemplate parsed = resolve_template(a, tok);
  EXPECT_EQ(parsed.spec().kind, TemplateKind::kReasoning);
  const ChatTemplate named("qwen3", tok, template_options(a));
  const std::vector<Message> turns = {{Role::kUser, "Hi, what is 2+2?"}, {Role::kAssistant, "4."},
                                      {Role::kUser, "And 3+3?"}, {Role::kAssistant, "6."}};
  EXPECT_EQ(parsed.encode_multiturn(turns, "Be brief."), named.encode_multiturn(turns, "Be brief."));
  a.stage = "pt";
  EXPECT_EQ(resolve_template(a, tok).spec().name, "empty");
}

}  // namespace
}  // namespace lf

namespace lf {
namespace {

// interleave.json: HF datasets' _interleave_map_style_datasets on small
// datasets (round robin and probability sampling, both stopping strategies).
TEST(DataPipeline, InterleaveIndicesMatchHfDatasets) {
  std::ifstream in(test::fixtures_dir() / "data" / "interleave.json");
  auto cases = nlohmann::json::parse(in);
  ASSERT_GE(cases.size(), 6u);
  for (const auto& c : cases) {
    std::vector<double> probs;
    if (!c["probs"].is_null()) probs = c["probs"].get<std::vector<double>>();
    auto got = interleave_indices(c["lengths"].get<std::vector<size_t>>(), probs, c["seed"].get<uint64_t>(),
                                  c["strategy"] == "all_exhausted");
    EXPECT_EQ(got, c["indices"].get<std::vector<size_t>>()) << c["lengths"] << " " << c["strategy"];
  }
}

}  // namespace
}  // namespace lf

namespace lf {
namespace {

TEST(DataPipeline, InterleaveMixesDatasetsLikeLlamaFactory) {
  LF_REQUIRE_ASSETS();
  DataArgs a = fixture_args("alpaca_samples,sharegpt_samples");
  a.mix_strategy = "interleave_under";
  auto under = load_examples(a, a.dataset);
  ASSERT_EQ(under.size(), 12u);  // round robin until the 6-example set runs out
  EXPECT_NE(under[1].origin.find("sharegpt_samples.jsonl:1"), std::string::npos) << under[1].origin;
  a.mix_strategy = "interleave_over";
  a.interleave_probs = {0.5, 0.5};
  auto over = load_examples(a, a.dataset);
  auto want = interleave_indices({10, 6}, {0.5, 0.5}, 42, true);
  ASSERT_EQ(over.size(), want.size());
}

}  // namespace
}  // namespace lf

namespace lf {
namespace {

// numpy_legacy_sampling.json: np.random.seed(seed); permutation(n)[:k] (+ choice(n, k - n)),
// LLaMA-Factory's num_samples sampling.
TEST(DataPipeline, NumSamplesMatchesNumpyLegacyRandom) {
  std::ifstream in(test::fixtures_dir() / "data" / "numpy_legacy_sampling.json");
  auto cases = nlohmann::json::parse(in);
  ASSERT_GE(cases.size(), 5u);
  for (const auto& c : cases) {
    NumpyLegacyRandom rng(c["seed"].get<uint32_t>());
    EXPECT_EQ(rng.sample(c["n"].get<size_t>(), c["num_samples"].get<size_t>()),
              c["indices"].get<std::vector<size_t>>())
        << c["seed"] << " " << c["n"] << " " << c["num_samples"];
  }
}

}  // namespace
}  // namespace lf

namespace lf {
namespace {

TEST(DataPipeline, NumSamplesDrawsFromTheGlobalNumpyStream) {
  LF_REQUIRE_ASSETS();
  DataArgs a = fixture_args("alpaca_samples");
  auto all = load_examples(a, {"alpaca_samples"});
  auto sub = load_examples(a, {"alpaca_samples_sub", "alpaca_samples_over"});
  ASSERT_EQ(sub.size(), 4u + 13u);
  NumpyLegacyRandom rng(42);
  auto first = rng.sample(10, 4);
  auto second = rng.sample(10, 13);  // the stream continues across datasets
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(sub[i].origin, all[first[i]].origin) << i;
  for (size_t i = 0; i < 13; ++i) EXPECT_EQ(sub[4 + i].origin, all[second[i]].origin) << i;
  a.max_samples = 2;  // applied after num_samples, as in LLaMA-Factory
  auto capped = load_examples(a, {"alpaca_samples_sub"});
  ASSERT_EQ(capped.size(), 2u);
  EXPECT_EQ(capped[1].origin, all[first[1]].origin);
}

}  // namespace
}  // namespace lf
