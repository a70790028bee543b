// `deepspeed:`: LLaMA-Factory's example files as they are, "auto" as HF fills it,
// contradictions and bad files as clear errors, and lf-train's own zero_stage / offload.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "lf/common/error.h"
#include "lf/config/sharding.h"
#include "lf/config/train_config.h"

using namespace lf::config;
namespace fs = std::filesystem;

namespace {

const std::string kFixtures = LF_CONFIG_FIXTURES;

// A scratch folder with a model config.json (hidden_size 64), for "auto" bucket sizes.
const fs::path& scratch() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("lf-config-test-" + std::to_string(::getpid()));
    fs::create_directories(d / "model");
    std::ofstream(d / "model" / "config.json") << R"({"model_type": "qwen2", "hidden_size": 64})";
    return d;
  }();
  return dir;
}

std::string minimal() {
  return "model_name_or_path: " + (scratch() / "model").string() + "\ndataset: alpaca_en_demo\nbf16: true\n";
}

std::string write(const std::string& name, const std::string& text) {
  const fs::path p = scratch() / name;
  std::ofstream(p) << text;
  return p.string();
}

LoadedConfig parse(const std::string& extra, const std::vector<std::string>& overrides = {}) {
  return parse_train_config(minimal() + extra, overrides, "cfg.yaml");
}

std::string error_of(const std::string& extra, const std::vector<std::string>& overrides = {}) {
  try {
    parse(extra, overrides);
  } catch (const lf::ConfigError& e) {
    return e.what();
  }
  return "";
}

std::string ds(const std::string& fixture) { return "deepspeed: " + kFixtures + "/" + fixture + "\n"; }

double mib(double elements, double bytes) { return elements * bytes / (1024.0 * 1024.0); }

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

}  // namespace

TEST(DeepSpeed, LlamaFactoryZ0IsDataParallel) {
  auto loaded = parse(ds("ds_z0_config.json"));
  const auto& c = loaded.plan;
  EXPECT_EQ(c.parallel.zero_stage, 0);
  EXPECT_EQ(c.parallel.offload, "none");
  EXPECT_FALSE(c.parallel.overlap_comm);
  EXPECT_DOUBLE_EQ(c.parallel.reduce_bucket_mb, mib(5e8, 2));  // bf16: 2 bytes an element
  EXPECT_DOUBLE_EQ(c.parallel.allgather_bucket_mb, mib(5e8, 2));
  EXPECT_EQ(c.parallel.sharding_source, "deepspeed: " + kFixtures + "/ds_z0_config.json");
  EXPECT_FALSE(c.parallel.train_batch_size.has_value());
  // One warning line for the file, naming what has no effect (at non-default values only).
  ASSERT_EQ(loaded.warnings.size(), 1u) << joined(loaded.warnings);
  const auto& w = loaded.warnings[0];
  EXPECT_NE(w.find("zero_allow_untested_optimizer"), std::string::npos) << w;
  EXPECT_NE(w.find("round_robin_gradients"), std::string::npos) << w;
  EXPECT_EQ(w.find("monitor_config"), std::string::npos) << w;  // DeepSpeed does not read it either
  EXPECT_EQ(w.find("allgather_partitions"), std::string::npos) << w;  // true is DeepSpeed's default
}

TEST(DeepSpeed, LlamaFactoryZ2AndZ2Offload) {
  auto z2 = parse(ds("ds_z2_config.json")).plan;
  EXPECT_EQ(z2.parallel.zero_stage, 2);
  EXPECT_EQ(z2.parallel.offload, "none");
  EXPECT_FALSE(z2.parallel.overlap_comm);
  auto off = parse(ds("ds_z2_offload_config.json")).plan;
  EXPECT_EQ(off.parallel.zero_stage, 2);
  EXPECT_EQ(off.parallel.offload, "optimizer");
  EXPECT_TRUE(off.parallel.pin_memory);
  // fp32 training: 4 bytes an element.
  auto fp32 = parse(ds("ds_z2_config.json"), {"bf16=false"}).plan;
  EXPECT_DOUBLE_EQ(fp32.parallel.reduce_bucket_mb, mib(5e8, 4));
}

TEST(DeepSpeed, LlamaFactoryZ3ResolvesAutoFromTheModel) {
  auto loaded = parse(ds("ds_z3_config.json"));
  const auto& c = loaded.plan;
  EXPECT_EQ(c.parallel.zero_stage, 3);
  EXPECT_EQ(c.parallel.offload, "none");
  EXPECT_FALSE(c.parallel.overlap_comm);
  EXPECT_DOUBLE_EQ(c.parallel.reduce_bucket_mb, mib(64 * 64, 2));              // HF: hidden_size^2
  EXPECT_DOUBLE_EQ(c.parallel.prefetch_bucket_mb, mib(std::floor(0.9 * 64 * 64), 2));  // HF: 0.9 hidden_size^2
  EXPECT_DOUBLE_EQ(c.parallel.allgather_bucket_mb, mib(5e8, 2));               // DeepSpeed's default
  ASSERT_EQ(loaded.warnings.size(), 1u) << joined(loaded.warnings);
  EXPECT_NE(loaded.warnings[0].find("stage3_gather_16bit_weights_on_model_save: true (lf-train always saves full"),
            std::string::npos)
      << loaded.warnings[0];
  EXPECT_EQ(loaded.warnings[0].find("sub_group_size"), std::string::npos) << "1e9 is DeepSpeed's default";

  auto off = parse(ds("ds_z3_offload_config.json")).plan;
  EXPECT_EQ(off.parallel.zero_stage, 3);
  EXPECT_EQ(off.parallel.offload, "params");
  EXPECT_TRUE(off.parallel.pin_memory);
  // Older LLaMA-Factory releases: overlap_comm true.
  EXPECT_TRUE(parse(ds("ds_z3_overlap_config.json")).plan.parallel.overlap_comm);
}

TEST(DeepSpeed, AutoBucketSizesNeedTheModelsHiddenSize) {
  const auto e = [&] {
    try {
      parse_train_config("model_name_or_path: /nonexistent/model\ndataset: a\n" + ds("ds_z3_config.json"), {}, "cfg.yaml");
    } catch (const lf::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  EXPECT_NE(e.find("`zero_optimization.reduce_bucket_size: \"auto\"` is HF's hidden_size^2"), std::string::npos) << e;
  EXPECT_NE(e.find("/nonexistent/model/config.json"), std::string::npos) << e;
}

TEST(DeepSpeed, LlamaFactoryFilesUnderFp16AreRefusedNamingTheScalerKeys) {
  const std::vector<std::string> fp16 = {"bf16=false", "fp16=true"};
  const auto e = error_of(ds("ds_z2_config.json"), fp16);
  EXPECT_NE(e.find("`fp16.loss_scale_window: 1000` under fp16 is refused"), std::string::npos) << e;
  EXPECT_NE(e.find("`fp16.hysteresis: 2` under fp16 is refused"), std::string::npos) << e;
  EXPECT_NE(e.find("GradScaler"), std::string::npos) << e;
  // Settings lf-train's scaler honours are accepted.
  const std::string honoured = write("fp16_ok.json", R"({"fp16": {"enabled": "auto", "loss_scale": 0,
      "loss_scale_window": 2000, "initial_scale_power": 16, "hysteresis": 1}, "zero_optimization": {"stage": 1}})");
  EXPECT_EQ(error_of("deepspeed: " + honoured + "\n", fp16), "");
}

TEST(DeepSpeed, MissingFileSaysWhereRelativePathsResolve) {
  auto e = error_of("deepspeed: does_not_exist.json\n");
  EXPECT_NE(e.find("cfg.yaml:4: `deepspeed: does_not_exist.json`: no such file"), std::string::npos) << e;
  EXPECT_NE(e.find("resolved against the working directory"), std::string::npos) << e;
  // The file sits beside the config but the run is elsewhere: say so.
  const fs::path dir = scratch() / "beside";
  fs::create_directories(dir);
  std::ofstream(dir / "ds.json") << R"({"zero_optimization": {"stage": 2}})";
  std::ofstream(dir / "train.yaml") << minimal() << "deepspeed: ds.json\n";
  try {
    load_train_config((dir / "train.yaml").string(), {});
    FAIL() << "a relative path resolves against the working directory, not the config's folder";
  } catch (const lf::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("exists beside the config"), std::string::npos) << e.what();
  }
  EXPECT_NE(error_of("deepspeed: " + scratch().string() + "\n").find("is a folder"), std::string::npos);
}

TEST(DeepSpeed, InvalidJsonNamesLineAndColumn) {
  const std::string bad = write("bad.json", "{\n  \"zero_optimization\": {\n    \"stage\": 2,\n  }\n}\n");
  const auto e = error_of("deepspeed: " + bad + "\n");
  EXPECT_NE(e.find(bad + ":4:3: invalid JSON"), std::string::npos) << e;
  const std::string dup = write("dup.json", R"({"zero_optimization": {"stage": 2, "stage": 3}})");
  EXPECT_NE(error_of("deepspeed: " + dup + "\n").find("\"stage\" appears twice"), std::string::npos);
  const std::string list = write("list.json", "[1, 2]");
  EXPECT_NE(error_of("deepspeed: " + list + "\n").find("expected a JSON object"), std::string::npos);
}

TEST(DeepSpeed, StageFourAndOtherRefusalsNameTheKey) {
  auto stage4 = write("z4.json", R"({"zero_optimization": {"stage": 4}})");
  EXPECT_NE(error_of("deepspeed: " + stage4 + "\n").find("`zero_optimization.stage: 4` is refused: DeepSpeed's ZeRO "
                                                         "stages are 0 (off), 1, 2 and 3"),
            std::string::npos);
  auto nvme = write("nvme.json", R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"},
      "offload_optimizer": {"device": "nvme"}}})");
  EXPECT_NE(error_of("deepspeed: " + nvme + "\n").find("offload_param.device: \"nvme\"` is refused"), std::string::npos);
  auto lamb = write("lamb.json", R"({"optimizer": {"type": "Lamb", "params": {"lr": "auto"}}})");
  EXPECT_NE(error_of("deepspeed: " + lamb + "\n").find("`optimizer.type: \"Lamb\"` is refused"), std::string::npos);
  auto sched = write("sched.json", R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": "auto"}}})");
  EXPECT_NE(error_of("deepspeed: " + sched + "\n").find("`scheduler` is refused"), std::string::npos);
  auto quant = write("quant.json", R"({"zero_optimization": {"stage": 3, "zero_quantized_weights": true}})");
  EXPECT_NE(error_of("deepspeed: " + quant + "\n").find("`zero_optimization.zero_quantized_weights: true` is refused"),
            std::string::npos);
  auto bad_auto = write("auto.json", R"({"zero_optimization": {"stage": 2, "allgather_bucket_size": "auto"}})");
  EXPECT_NE(error_of("deepspeed: " + bad_auto + "\n").find("`zero_optimization.allgather_bucket_size: \"auto\"`"),
            std::string::npos);
  auto adam = write("adam.json", R"({"optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto"}}})");
  EXPECT_EQ(error_of("deepspeed: " + adam + "\n"), "");
}

TEST(DeepSpeed, UnknownKeysGetDidYouMean) {
  auto typo = write("typo.json", R"({"zero_optimisation": {"stage": 2}})");
  EXPECT_NE(error_of("deepspeed: " + typo + "\n").find("unknown key `zero_optimisation`: did you mean zero_optimization"),
            std::string::npos);
  auto nested = write("nested.json", R"({"zero_optimization": {"stag": 2, "overlap_com": true}})");
  const auto e = error_of("deepspeed: " + nested + "\n");
  EXPECT_NE(e.find("unknown key `zero_optimization.stag`: did you mean stage"), std::string::npos) << e;
  EXPECT_NE(e.find("2 problems"), std::string::npos) << e;  // every problem at once
}

TEST(DeepSpeed, ExplicitValuesThatContradictTheYamlAreErrorsNamingBoth) {
  auto f = write("contra.json", R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 8,
      "gradient_clipping": 0.5, "bf16": {"enabled": false}, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}})");
  const auto e = error_of("per_device_train_batch_size: 2\ngradient_accumulation_steps: 4\ndeepspeed: " + f + "\n");
  EXPECT_NE(e.find("`train_micro_batch_size_per_gpu: 4` contradicts `per_device_train_batch_size: 2` (cfg.yaml:4)"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("`gradient_accumulation_steps: 8` contradicts `gradient_accumulation_steps: 4`"), std::string::npos)
      << e;
  EXPECT_NE(e.find("`gradient_clipping: 0.5` contradicts `max_grad_norm: 1.0` (its default)"), std::string::npos) << e;
  EXPECT_NE(e.find("`bf16.enabled: false` contradicts `bf16: true`"), std::string::npos) << e;
  EXPECT_NE(e.find("`optimizer.params.lr: 0.001` contradicts `learning_rate: 5e-05`"), std::string::npos) << e;
  // Equal explicit values are fine.
  auto same = write("same.json", R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4})");
  EXPECT_EQ(error_of("per_device_train_batch_size: 2\ngradient_accumulation_steps: 4\ndeepspeed: " + same + "\n"), "");
}

TEST(DeepSpeed, TrainBatchSizeIsCheckedAgainstTheWorldSize) {
  auto f = write("tbs.json", R"({"train_batch_size": 16, "zero_optimization": {"stage": 2}})");
  auto c = parse("per_device_train_batch_size: 2\ngradient_accumulation_steps: 2\ndeepspeed: " + f + "\n").plan;
  ASSERT_EQ(c.parallel.train_batch_size.value(), 16);
  EXPECT_NO_THROW(check_world_size(c, 4));
  try {
    check_world_size(c, 2);
    FAIL();
  } catch (const lf::ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("train_batch_size 16, but per_device_train_batch_size 2 x gradient_accumulation_steps 2 x world "
                     "size 2 = 8"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("run on 4 ranks"), std::string::npos) << m;
  }
  auto odd = write("tbs_odd.json", R"({"train_batch_size": 30})");
  EXPECT_NE(error_of("per_device_train_batch_size: 2\ngradient_accumulation_steps: 2\ndeepspeed: " + odd + "\n")
                .find("`train_batch_size: 30` is not a multiple of"),
            std::string::npos);
  EXPECT_NO_THROW(check_world_size(parse(ds("ds_z2_config.json")).plan, 3));  // "auto"
}

TEST(DeepSpeed, TheSameStageGivenTwoWaysMustAgree) {
  auto e = error_of("zero_stage: 2\n" + ds("ds_z3_config.json"));
  EXPECT_NE(e.find("`zero_stage: 2` and `deepspeed: " + kFixtures + "/ds_z3_config.json` (cfg.yaml:5: stage 3)"),
            std::string::npos)
      << e;
  EXPECT_EQ(parse("zero_stage: 3\n" + ds("ds_z3_config.json")).plan.parallel.zero_stage, 3);
  e = error_of("offload: optimizer\n" + ds("ds_z3_offload_config.json"));
  EXPECT_NE(e.find("`offload: optimizer` and `deepspeed:"), std::string::npos) << e;
  EXPECT_NE(e.find("offload params"), std::string::npos) << e;
  e = error_of(ds("ds_z2_config.json") + "fsdp: full_shard\n");
  EXPECT_NE(e.find("`deepspeed` and cfg.yaml:5: `fsdp` both ask for sharding"), std::string::npos) << e;
}

TEST(DeepSpeed, InlineMappingAndContentInTheCanonicalConfig) {
  auto c = parse("deepspeed: {zero_optimization: {stage: 1}}\n").plan;
  EXPECT_EQ(c.parallel.zero_stage, 1);
  EXPECT_EQ(c.parallel.sharding_source, "deepspeed: (inline mapping)");
  // Two nodes, one path, different files: their configs must not look equal.
  const std::string path = write("node.json", R"({"zero_optimization": {"stage": 2}})");
  const auto a = parse("deepspeed: " + path + "\n").canonical;
  std::ofstream(path) << R"({"zero_optimization": {"stage": 2, "overlap_comm": true}})";
  const auto b = parse("deepspeed: " + path + "\n").canonical;
  EXPECT_NE(a, b);
  EXPECT_NE(b.find("\"overlap_comm\":true"), std::string::npos) << b;
}

// DeepSpeed's ZeRO-Offload++ ratio and lf-train's offload_ratio: the share on the host.
TEST(DeepSpeed, OffloadRatioFromTheFileOrOwnKey) {
  auto part = write("ratio.json", R"({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu",
      "ratio": 0.4}}})");
  auto c = parse("deepspeed: " + part + "\n").plan;
  EXPECT_EQ(c.parallel.offload, "optimizer");
  EXPECT_DOUBLE_EQ(c.parallel.offload_ratio, 0.4);
  EXPECT_DOUBLE_EQ(parse("deepspeed: " + part + "\noffload_ratio: 0.4\n").plan.parallel.offload_ratio, 0.4);
  auto e = error_of("deepspeed: " + part + "\noffload_ratio: 0.5\n");
  EXPECT_NE(e.find("`offload_ratio: 0.5` and `deepspeed:"), std::string::npos) << e;
  EXPECT_NE(e.find("offload_optimizer.ratio 0.4"), std::string::npos) << e;
  auto bad = write("ratio0.json", R"({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu",
      "ratio": 0}}})");
  e = error_of("deepspeed: " + bad + "\n");
  EXPECT_NE(e.find("`zero_optimization.offload_optimizer.ratio: 0`: expected the share"), std::string::npos) << e;
  auto nothing = write("ratio_none.json", R"({"zero_optimization": {"stage": 3, "offload_optimizer": {"ratio": 0.3}}})");
  e = error_of("deepspeed: " + nothing + "\n");
  EXPECT_NE(e.find("offloads nothing"), std::string::npos) << e;

  auto own = parse("zero_stage: 3\noffload: optimizer\noffload_ratio: 0.25\n").plan;
  EXPECT_DOUBLE_EQ(own.parallel.offload_ratio, 0.25);
  EXPECT_DOUBLE_EQ(parse("zero_stage: 3\noffload: optimizer\n").plan.parallel.offload_ratio, 1.0);
  e = error_of("zero_stage: 3\noffload: optimizer\noffload_ratio: 1.5\n");
  EXPECT_NE(e.find("`offload_ratio: 1.5`: expected the share"), std::string::npos) << e;
  e = error_of("zero_stage: 3\noffload_ratio: 0.5\n");
  EXPECT_NE(e.find("offloads nothing without an offload"), std::string::npos) << e;
}

TEST(DeepSpeed, OwnKeysZeroStageAndOffload) {
  auto c = parse("zero_stage: 3\noffload: params\n").plan;
  EXPECT_EQ(c.parallel.zero_stage, 3);
  EXPECT_EQ(c.parallel.offload, "params");
  EXPECT_EQ(c.parallel.sharding_source, "zero_stage: 3");
  EXPECT_TRUE(c.parallel.overlap_comm);
  EXPECT_DOUBLE_EQ(c.parallel.reduce_bucket_mb, 25);
  auto none = parse("").plan;
  EXPECT_EQ(none.parallel.zero_stage, 0);
  EXPECT_EQ(none.parallel.sharding_source, "");
  EXPECT_NE(error_of("zero_stage: 4\n").find("`zero_stage: 4` is not supported"), std::string::npos);
  EXPECT_NE(error_of("zero_stage: 2\noffload: params\n").find("`offload: params` needs zero_stage 3"), std::string::npos);
  EXPECT_NE(error_of("offload: optimizer\n").find("`offload: optimizer` needs zero_stage 2 or 3"), std::string::npos);
  // ZeRO-Offload streams gradient shards to the host: stage 1 keeps them all on the device.
  EXPECT_NE(error_of("zero_stage: 1\noffload: optimizer\n").find("needs zero_stage 2 or 3"), std::string::npos);
  EXPECT_NE(error_of("zero_stage: 1\noffload: disk\n").find("`offload: disk` is not supported"), std::string::npos);
}
