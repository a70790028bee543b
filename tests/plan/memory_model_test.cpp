// The memory model (lf/plan/memory_model.h) against the peaks measured on the GPU
// (tests/fixtures/plan/measured_peaks.json, each figure with its source line in docs/), and its
// terms against arithmetic done here by hand.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "../support/scoped_env.h"
#include "lf/config/train_config.h"
#include "lf/plan/memory_model.h"
#include "lf/plan/zero_bytes.h"

namespace lf::plan {
namespace {

const double kGiB = static_cast<double>(int64_t{1} << 30);

std::string source(const std::string& rel) { return std::string(LF_SOURCE_DIR) + "/" + rel; }

model::ModelConfig shape(const std::string& name) {
  return model::load_model_config(source("configs/models/" + name + ".json"));
}

// A row's plan as the trainer would resolve it: the config file, the bench's overrides, the
// row's own, and its knobs in the environment while the builder reads them.
config::JobPlan row_plan(const nlohmann::json& fixture, const nlohmann::json& row) {
  std::vector<std::unique_ptr<test::ScopedEnv>> knobs;
  for (const auto& [name, value] : row["knobs"].items())
    knobs.push_back(std::make_unique<test::ScopedEnv>(name.c_str(), value.get<std::string>().c_str()));
  std::vector<std::string> overrides = fixture["bench_overrides"].get<std::vector<std::string>>();
  for (const auto& o : row["overrides"]) overrides.push_back(o.get<std::string>());
  return config::load_train_config(source(row["config"].get<std::string>()), overrides).plan;
}

// One fixture row: the predicted GPU peak (and, where measured, host bytes) within tolerance.
void check_row(const nlohmann::json& fixture, const nlohmann::json& row) {
  const double tolerance = fixture["tolerance"].get<double>();
  const auto plan = row_plan(fixture, row);
  const auto mc = model::load_model_config(source(row["model_config"].get<std::string>()));
  const WorldLayout world{row["world"]["nnodes"].get<int64_t>(), row["world"]["nproc_per_node"].get<int64_t>()};
  const auto p = predict_memory(plan, mc, world);
  const double measured = row["measured_gib"].get<double>() * kGiB;
  std::string terms;
  for (const auto& t : p.gpu) terms += fmt::format("\n  {:<15} {:>10}  {}", t.kind, format_bytes(t.bytes), t.what);
  const auto name = row["name"].get<std::string>();
  EXPECT_NEAR(p.gpu_peak() / measured, 1.0, tolerance)
      << name << ": predicted " << format_bytes(p.gpu_peak()) << " (" << p.peak_phase << "), measured "
      << format_bytes(measured) << terms;
  EXPECT_EQ(p.dominant().kind, row["dominant_kind"].get<std::string>()) << name << terms;
  std::printf("%-58s predicted %10s measured %10s (%+.1f%%)\n", name.c_str(), format_bytes(p.gpu_peak()).c_str(),
              format_bytes(measured).c_str(), 100 * (p.gpu_peak() / measured - 1));
  if (!row.contains("measured_host_gib")) return;
  const double host = row["measured_host_gib"].get<double>() * kGiB;
  EXPECT_NEAR(p.host_total() / host, 1.0, tolerance) << name << ": host " << format_bytes(p.host_total()) << " vs RSS "
                                                     << format_bytes(host);
  EXPECT_LT(p.host_total(), host) << name << ": the RSS holds the pinned state and the process";
}

nlohmann::json fixture() {
  std::ifstream in(source("tests/fixtures/plan/measured_peaks.json"));
  return nlohmann::json::parse(in);
}

// Issue 28's acceptance: 7B LoRA with and without checkpointing, 1.5B full, 7B full ZeRO-3 at world 1.
TEST(MemoryModel, MeasuredPeaksOfTheBenchmarkRows) {
  const auto f = fixture();
  ASSERT_EQ(f["rows"].size(), 4u);
  for (const auto& row : f["rows"]) check_row(f, row);
}

TEST(MemoryModel, MoreMeasuredPeaksSmallShapesAndOffload) {
  const auto f = fixture();
  ASSERT_GE(f["more_rows"].size(), 10u);
  for (const auto& row : f["more_rows"]) check_row(f, row);
}

config::JobPlan bench_plan(const std::string& finetuning_type) {
  config::JobPlan c;
  c.adapter.finetuning_type = finetuning_type;
  c.adapter.lora_rank = 16;
  c.precision.bf16 = true;
  c.data.cutoff_len = 2048;
  c.data.packing = true;
  c.schedule.per_device_train_batch_size = 4;
  c.model.gradient_checkpointing = false;
  return c;
}

TEST(MemoryModel, FullFineTuningStateIsSixteenBytesAParameter) {
  const auto mc = shape("qwen2.5-1.5b");
  const double n = 1543714304;  // Qwen2.5-1.5B, tied: 151936 x 1536 + 28 x 46,797,824 + 1536 + biases
  const auto p = predict_memory(bench_plan("full"), mc, {});
  EXPECT_DOUBLE_EQ(p.gpu_bytes("master"), 4 * n);
  EXPECT_DOUBLE_EQ(p.gpu_bytes("moments"), 8 * n);
  EXPECT_EQ(p.gpu_bytes("gradients"), 0);  // one process, one micro-step: allocated as activations are freed
  // Per token per layer: 4 x 1536 + 2 x 1536 + 2 x 256 + 3 x 8960 bf16 elements + 12 heads' fp32 lse.
  const double per_token = 2.0 * (4 * 1536 + 2 * 1536 + 2 * 256 + 3 * 8960) + 4 * 12;
  const double copies = 2.0 * (1536 * 1536 * 2 + 1536 * 256 * 2 + 3 * 1536 * 8960);
  EXPECT_DOUBLE_EQ(p.gpu_bytes("activations"), 28 * (4 * 2048 * per_token + copies));
  auto accumulating = bench_plan("full");
  accumulating.schedule.gradient_accumulation_steps = 2;  // the first micro-step's sums wait for the second
  EXPECT_DOUBLE_EQ(predict_memory(accumulating, mc, {}).gpu_bytes("gradients"), 4 * n);
}

TEST(MemoryModel, CheckpointingKeepsTheLayersInputsAndMidpoints) {
  const auto mc = shape("qwen2.5-7b");
  auto c = bench_plan("lora");
  c.model.gradient_checkpointing = true;
  const auto lean = predict_memory(c, mc, {});
  EXPECT_DOUBLE_EQ(lean.gpu_bytes("activations"), 28.0 * 4 * 2048 * 3584 * 2 * 2);
  c.model.kernels.lean_recompute = false;
  EXPECT_DOUBLE_EQ(predict_memory(c, mc, {}).gpu_bytes("activations"), 28.0 * 4 * 2048 * 3584 * 2);
  EXPECT_GT(lean.gpu_bytes("recompute"), 0);
  c.model.gradient_checkpointing = false;
  EXPECT_GT(predict_memory(c, mc, {}).gpu_bytes("activations"), 10 * lean.gpu_bytes("activations"));
  // The frozen base in bf16, the adapters' fp32 weights and moments.
  const double base = 7615616512, adapters = 28.0 * 16 * (2 * (3584 + 3584) + 2 * (3584 + 512) + 3 * (3584 + 18944));
  EXPECT_DOUBLE_EQ(lean.gpu_bytes("weights"), 2 * base);
  EXPECT_DOUBLE_EQ(lean.gpu_bytes("master"), 4 * adapters);
  EXPECT_DOUBLE_EQ(lean.gpu_bytes("moments"), 8 * adapters);
}

// QLoRA (quantization_bit 4): the decoder linears weigh their 4-bit storage (half a byte a weight,
// a uint8 absmax code per 64 and an fp32 absmax + offset per 64 x 256 under double quantization), the
// embedding, lm_head and norms stay bf16, the GEMMs dequantize into one buffer of the largest
// linear; the Qwen2.5-7B memory floor (seq 2048, checkpointing, micro-batch 1) fits 8 GiB; ZeRO-3
// shards the 4-bit bytes.
TEST(MemoryModel, QloraCountsFourBitBytes) {
  const auto mc = shape("qwen2.5-7b");
  auto c = bench_plan("lora");
  c.model.gradient_checkpointing = true;
  const auto lora = predict_memory(c, mc, {});
  c.precision.quantization_bit = 4;
  const auto q = predict_memory(c, mc, {});
  const double linears = 28.0 * (2 * 3584.0 * 3584 + 2 * 3584.0 * 512 + 3 * 3584.0 * 18944);
  const double per_weight = 0.5 + 1.0 / 64 + 8.0 / (64 * 256);
  EXPECT_DOUBLE_EQ(q.gpu_bytes("weights"), lora.gpu_bytes("weights") - linears * (2 - per_weight));
  EXPECT_DOUBLE_EQ(q.gpu_bytes("runtime") - lora.gpu_bytes("runtime"), 2.0 * 3584 * 18944);
  EXPECT_DOUBLE_EQ(q.gpu_bytes("master"), lora.gpu_bytes("master"));
  c.precision.double_quantization = false;
  EXPECT_DOUBLE_EQ(predict_memory(c, mc, {}).gpu_bytes("weights") - q.gpu_bytes("weights"),
                   linears * (4.0 / 64 - per_weight + 0.5));
  c.precision.double_quantization = true;
  c.schedule.per_device_train_batch_size = 1;
  const auto floor = predict_memory(c, mc, {});
  std::printf("Qwen2.5-7B QLoRA floor (seq 2048, checkpointing, micro-batch 1): %s\n", format_bytes(floor.gpu_peak()).c_str());
  EXPECT_LT(floor.gpu_peak(), 8 * kGiB);
  c.parallel.zero_stage = 3;
  const auto sharded = predict_memory(c, mc, {1, 2});
  EXPECT_LT(sharded.gpu_bytes("weights"), 0.55 * q.gpu_bytes("weights"));
}

TEST(MemoryModel, ZeroShardsTheStateOverTheWorld) {
  const auto mc = shape("qwen2.5-7b");
  auto c = bench_plan("full");
  c.model.gradient_checkpointing = true;
  const double n = 7615616512;
  for (const int64_t stage : {1, 2, 3}) {
    c.parallel.zero_stage = stage;
    const auto one = predict_memory(c, mc, {1, 1}), eight = predict_memory(c, mc, {2, 4});
    EXPECT_DOUBLE_EQ(eight.gpu_bytes("moments"), 8 * n / 8) << stage;
    EXPECT_DOUBLE_EQ(eight.gpu_bytes("master"), 4 * n / 8) << stage;
    EXPECT_DOUBLE_EQ(eight.gpu_bytes("gradients"), 4 * n / 8 + (stage == 1 ? 4 * n : 0)) << stage;
    EXPECT_DOUBLE_EQ(eight.gpu_bytes("weights"), stage < 3 ? 2 * n : 0) << stage;
    EXPECT_LT(eight.gpu_peak(), one.gpu_peak()) << stage;
    EXPECT_EQ(eight.gpu_bytes("gathered_units") > 0, stage == 3) << stage;
  }
}

// The DeepSpeed buckets as ZeRO resolves them (zero_comm.h), counted in units of the largest one
// (the 7B's untied head, 1.09 GB in bf16): 25 MiB prefetches one unit and keeps two reductions in
// flight; a bucket of 0 prefetches none, one of 3.5 heads three; each prefetched unit counts a
// layer more gathered. overlap_comm false waits for each reduction at once.
TEST(MemoryModel, TheBucketsAreCountsOfUnits) {
  const auto mc = shape("qwen2.5-7b");
  auto c = bench_plan("full");
  c.parallel.zero_stage = 3;
  const double layer = 233057792, embedding = 152064.0 * 3584;  // elements
  auto at = [&](double prefetch_mb) {
    c.parallel.prefetch_bucket_mb = prefetch_mb;
    return predict_memory(c, mc, {1, 8});
  };
  const auto none = at(0), one = at(25), three = at(3.5 * 2 * embedding / (1 << 20));
  EXPECT_EQ(none.zero_comm.prefetch_units, 0);
  EXPECT_EQ(one.zero_comm.prefetch_units, 1);
  EXPECT_EQ(three.zero_comm.prefetch_units, 3);
  EXPECT_DOUBLE_EQ(one.gpu_bytes("gathered_units") - none.gpu_bytes("gathered_units"), 2 * layer);
  EXPECT_DOUBLE_EQ(three.gpu_bytes("gathered_units") - one.gpu_bytes("gathered_units"), 2 * 2 * layer);
  c.parallel.prefetch_bucket_mb = 25;
  const auto overlapped = predict_memory(c, mc, {1, 8});
  EXPECT_EQ(overlapped.zero_comm.reductions_in_flight, 2);
  c.parallel.overlap_comm = false;
  const auto waited = predict_memory(c, mc, {1, 8});
  EXPECT_EQ(waited.zero_comm.reductions_in_flight, 0);
}

TEST(MemoryModel, DataParallelKeepsGradientBuckets) {
  const auto mc = shape("qwen2.5-1.5b");
  const auto c = bench_plan("full");
  const auto one = predict_memory(c, mc, {1, 1}), two = predict_memory(c, mc, {1, 2});
  EXPECT_DOUBLE_EQ(two.gpu_peak() - one.gpu_peak(), 4.0 * 1543714304);  // fp32 buckets, resident through forward
}

// The host bytes offload pins, checked by the worker against the node before anything loads.
TEST(MemoryModel, OffloadPinsSixteenBytesATrainableParameterOnTheHost) {
  const auto mc = shape("qwen2.5-1.5b");
  auto c = bench_plan("full");
  c.parallel.zero_stage = 3;
  c.parallel.offload = "optimizer";
  const double n = 1543714304;
  EXPECT_DOUBLE_EQ(predict_memory(c, mc, {1, 1}).host_total(), 16 * n);
  EXPECT_DOUBLE_EQ(predict_memory(c, mc, {1, 4}).host_total(), 4 * n);
  const auto all = predict_memory(c, mc, {1, 1});
  EXPECT_DOUBLE_EQ(all.gpu_bytes("moments"), 0);
  EXPECT_DOUBLE_EQ(all.gpu_bytes("weights"), 2 * n);  // each unit's bf16 shard stays: the gathers' input
  c.parallel.offload = "params";
  EXPECT_DOUBLE_EQ(predict_memory(c, mc, {1, 1}).gpu_bytes("weights"), 0);
  // offload_ratio: whole units from the head down while they fit (the tied head holds the final norm
  // only; then the layers of 46,797,824 + biases); the rest keep their state on the device.
  c.parallel.offload = "optimizer";
  c.parallel.offload_ratio = 0.5;
  const auto half = predict_memory(c, mc, {1, 1});
  EXPECT_LE(half.host_total(), 0.5 * 16 * n);
  EXPECT_GT(half.host_total(), 0.45 * 16 * n);
  EXPECT_NEAR(half.gpu_bytes("moments") + half.host_total() / 2, 8 * n, 1);
}

TEST(MemoryModel, LoraOffloadPinsTheAdaptersOnly) {
  const auto mc = shape("qwen2.5-1.5b");
  auto c = bench_plan("lora");
  c.parallel.zero_stage = 2;
  c.parallel.offload = "optimizer";
  // r x (in + out) per projection: q, k, v, o, gate, up, down, over 28 layers.
  const double h = 1536, kv = 256, ff = 8960;
  const double adapters = 28 * 16 * ((h + h) + (h + kv) + (h + kv) + (h + h) + 3 * (h + ff));
  EXPECT_DOUBLE_EQ(predict_memory(c, mc, {1, 1}).host_total(), 16 * adapters);
  c.adapter.lora_rank = 8;
  EXPECT_DOUBLE_EQ(predict_memory(c, mc, {1, 2}).host_total(), 16 * adapters / 4);
}

// ZeRO's own predicted bytes (ZeroStrategy::predicted_bytes) come from zero_state_bytes: the
// formula by hand for two units, one offloaded.
TEST(ZeroStateBytes, DeepSpeedsFormulaWithLfTrainsDtypes) {
  const std::vector<ZeroUnitCount> units{{100, 40, false}, {60, 0, true}};
  ZeroLayout z{3, 4, 2, 2, "none"};
  auto s = zero_state_bytes(units, z);
  EXPECT_DOUBLE_EQ(s.params, 2 * 40 / 4.0);  // frozen shards
  EXPECT_DOUBLE_EQ(s.grads, 4 * 160 / 4.0);
  EXPECT_DOUBLE_EQ(s.master, 4 * 160 / 4.0);
  EXPECT_DOUBLE_EQ(s.moments, 8 * 160 / 4.0);
  EXPECT_DOUBLE_EQ(s.largest_unit, 2 * 140.0);
  EXPECT_DOUBLE_EQ(s.host, 0);
  z.offload = "optimizer";
  s = zero_state_bytes(units, z);
  EXPECT_DOUBLE_EQ(s.host, 16 * 60 / 4.0);
  EXPECT_DOUBLE_EQ(s.params, 2 * 40 / 4.0 + 2 * 60 / 4.0);  // the host unit's bf16 shard on the device
  z.stage = 1;
  z.offload = "none";
  s = zero_state_bytes(units, z);
  EXPECT_DOUBLE_EQ(s.params, 2 * 160 + 2 * 40.0);  // replicated
  EXPECT_DOUBLE_EQ(s.grads, 4 * 160 / 4.0 + 4 * 160);
  EXPECT_DOUBLE_EQ(s.largest_unit, 2 * 100.0);  // the frozen part stays resident below stage 3
  EXPECT_EQ(offload_host_units({10, 30, 30, 5}, 0.5), (std::vector<bool>{false, false, true, true}));
  EXPECT_EQ(offload_host_units({10, 30, 30, 5}, 0.05), (std::vector<bool>{false, false, false, false}));
}

}  // namespace
}  // namespace lf::plan
