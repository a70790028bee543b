// `fsdp:` / `fsdp_config:` with HF TrainingArguments' semantics.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "lf/common/error.h"
#include "lf/config/train_config.h"

using namespace lf::config;

namespace {

const std::string kMinimal = "model_name_or_path: models/tiny\ndataset: alpaca_en_demo\n";

LoadedConfig parse(const std::string& extra) { return parse_train_config(kMinimal + extra, {}, "cfg.yaml"); }

std::string error_of(const std::string& extra) {
  try {
    parse(extra);
  } catch (const lf::ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Fsdp, FullShardAutoWrapIsStage3WithOneInfoLine) {
  auto loaded = parse("fsdp: full_shard auto_wrap\n");
  EXPECT_EQ(loaded.plan.parallel.zero_stage, 3);
  EXPECT_EQ(loaded.plan.parallel.offload, "none");
  EXPECT_EQ(loaded.plan.parallel.sharding_source, "fsdp: full_shard auto_wrap");
  EXPECT_TRUE(loaded.warnings.empty());
  ASSERT_EQ(loaded.notes.size(), 1u);
  EXPECT_NE(loaded.notes[0].find("lf-train wraps its own decoder layers"), std::string::npos) << loaded.notes[0];
}

TEST(Fsdp, StrategiesAndOffload) {
  EXPECT_EQ(parse("fsdp: shard_grad_op\n").plan.parallel.zero_stage, 2);
  EXPECT_EQ(parse("fsdp: no_shard\n").plan.parallel.zero_stage, 0);
  auto c = parse("fsdp: [full_shard, offload, auto_wrap]\n").plan;
  EXPECT_EQ(c.parallel.zero_stage, 3);
  EXPECT_EQ(c.parallel.offload, "params");
  EXPECT_EQ(parse("fsdp: offload\n").plan.parallel.zero_stage, 3);  // full_shard is the default strategy
  EXPECT_TRUE(parse("fsdp: false\n").plan.parallel.sharding_source.empty());
}

TEST(Fsdp, HybridShardAndOffloadBelowStage3AreRefused) {
  auto e = error_of("fsdp: hybrid_shard auto_wrap\n");
  EXPECT_NE(e.find("`fsdp: hybrid_shard` is refused: hybrid sharding shards within a node"), std::string::npos) << e;
  e = error_of("fsdp: shard_grad_op offload\n");
  EXPECT_NE(e.find("`offload` with fsdp: shard_grad_op is refused"), std::string::npos) << e;
  e = error_of("fsdp: full_shard shard_grad_op\n");
  EXPECT_NE(e.find("disagree"), std::string::npos) << e;
  e = error_of("fsdp: ful_shard\n");
  EXPECT_NE(e.find("unknown option 'ful_shard'"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean full_shard"), std::string::npos) << e;
}

TEST(Fsdp, FsdpConfigMappingOrFile) {
  auto loaded = parse("fsdp: full_shard auto_wrap\nfsdp_config: {fsdp_transformer_layer_cls_to_wrap: Qwen2DecoderLayer, "
                      "backward_prefetch: backward_pre, forward_prefetch: false}\n");
  EXPECT_EQ(loaded.plan.parallel.zero_stage, 3);
  ASSERT_EQ(loaded.notes.size(), 1u);  // auto_wrap and the class name: one line
  EXPECT_NE(loaded.notes[0].find("Qwen2DecoderLayer"), std::string::npos) << loaded.notes[0];
  EXPECT_NE(loaded.notes[0].find("auto_wrap"), std::string::npos) << loaded.notes[0];
  ASSERT_EQ(loaded.warnings.size(), 1u);  // backward_pre differs from HF's default (none)
  EXPECT_NE(loaded.warnings[0].find("backward_prefetch"), std::string::npos) << loaded.warnings[0];

  const auto path = std::filesystem::temp_directory_path() / ("lf-fsdp-" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << R"({"reshard_after_forward": false, "version": 2})";
  auto c = parse("fsdp: true\nfsdp_config: " + path.string() + "\n");
  std::filesystem::remove(path);
  EXPECT_EQ(c.plan.parallel.zero_stage, 2);
  EXPECT_NE(c.canonical.find("fsdp_config (content)={\"reshard_after_forward\":false"), std::string::npos)
      << c.canonical;
  EXPECT_EQ(parse("fsdp: true\nfsdp_config: {cpu_offload: true}\n").plan.parallel.offload, "params");
}

TEST(Fsdp, ContradictionsAndStrayConfig) {
  auto e = error_of("fsdp: full_shard\nfsdp_config: {reshard_after_forward: false}\n");
  EXPECT_NE(e.find("`fsdp: full_shard` (stage 3) and `fsdp_config.reshard_after_forward: false` (stage 2) disagree"),
            std::string::npos)
      << e;
  e = error_of("zero_stage: 2\nfsdp: full_shard\n");
  EXPECT_NE(e.find("`zero_stage: 2` and `fsdp: full_shard`"), std::string::npos) << e;
  e = error_of("fsdp: full_shard\nfsdp_config: {xla: true, fsdp_min_num_param: 3}\n");
  EXPECT_NE(e.find("`fsdp_config.xla: true` is refused"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean min_num_params"), std::string::npos) << e;
  auto loaded = parse("fsdp_config: {reshard_after_forward: false}\n");
  ASSERT_EQ(loaded.warnings.size(), 1u);
  EXPECT_NE(loaded.warnings[0].find("`fsdp_config` has no effect without `fsdp`"), std::string::npos);
  EXPECT_EQ(loaded.plan.parallel.zero_stage, 0);
}
