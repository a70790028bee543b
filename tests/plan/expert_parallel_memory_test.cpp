// The plan under expert parallelism (expert_model_parallel_size, issue 30): a rank holds E / ep of
// every sparse layer's experts and the whole of everything else (the router, a shared expert,
// attention, norms, embeddings), so its parameter counts and its training state are the dense part
// plus its share of the experts. The reference is counted here from what transformers wrote
// (tests/fixtures/model/*_tiny/model.safetensors: the Hub's per-expert tensors, "...experts.E...."),
// not from the layout the plan reads. Torch-free.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lf/config/train_config.h"
#include "lf/model/safetensors.h"
#include "lf/plan/memory_model.h"
#include "lf/plan/model_units.h"
#include "lf/plan/plan_summary.h"

namespace lf::plan {
namespace {

std::string source(const std::string& rel) { return std::string(LF_SOURCE_DIR) + "/" + rel; }
std::string fixture(const std::string& name) { return source("tests/fixtures/model/" + name); }

// Elements transformers wrote: every routed expert's tensors, and the rest (a tied lm_head once).
struct Written {
  double experts = 0, dense = 0, attention_lora = 0;  // attention_lora: rank 8 on q/k/v/o, r·(in + out) each
};

Written count_written(const std::string& name, bool tied) {
  Written w;
  model::SafetensorsFile file(fixture(name) + "/model.safetensors");
  for (const auto& t : file.tensors()) {
    if (tied && t.name == "lm_head.weight") continue;
    double n = 1;
    for (const auto d : t.shape) n *= static_cast<double>(d);
    (t.name.find(".experts.") != std::string::npos ? w.experts : w.dense) += n;
    for (const char* proj : {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight"})
      if (t.name.find(std::string("self_attn.") + proj) != std::string::npos)
        w.attention_lora += 8.0 * static_cast<double>(t.shape[0] + t.shape[1]);
  }
  return w;
}

config::JobPlan plan_for(const std::string& name, const std::string& mode, int64_t ep) {
  std::vector<std::string> overrides{"model_name_or_path=" + fixture(name), "finetuning_type=" + mode,
                                     "expert_model_parallel_size=" + std::to_string(ep)};
  if (mode == "lora")
    for (const char* o : {"lora_rank=8", "lora_target=q_proj,k_proj,v_proj,o_proj"}) overrides.push_back(o);
  return config::load_train_config(source("configs/tiny_cpu.yaml"), overrides).plan;
}

class ExpertParallelPlan : public ::testing::TestWithParam<const char*> {};

// Full fine-tuning on 2 ranks: fp32 master weights, fp32 gradients and two fp32 moments of this
// rank's parameters, exactly; the parameter counts and the summary's per-rank line the same elements.
TEST_P(ExpertParallelPlan, FullStateIsTheDensePartAndHalfTheExperts) {
  const auto mc = model::load_model_config(fixture(GetParam()) + "/config.json");
  const auto w = count_written(GetParam(), mc.tie_word_embeddings);
  ASSERT_GT(w.experts, 0) << GetParam();
  const double mine = w.dense + w.experts / 2;
  const auto plan = plan_for(GetParam(), "full", 2);
  const auto counts = parameter_counts(mc, plan.adapter, 2);
  EXPECT_EQ(static_cast<double>(counts.total), mine);
  EXPECT_EQ(static_cast<double>(counts.trainable), mine);
  EXPECT_EQ(static_cast<double>(parameter_counts(mc, plan.adapter).total), w.dense + w.experts);  // the model's
  const auto m = predict_memory(plan, mc, {1, 2});
  EXPECT_DOUBLE_EQ(m.gpu_bytes("master"), 4 * mine);
  EXPECT_DOUBLE_EQ(m.gpu_bytes("moments"), 8 * mine);
  EXPECT_DOUBLE_EQ(m.gpu_bytes("gradients"), 4 * mine);  // DDP's buckets and the experts' own: resident
  // The same job as plain DDP on 2 ranks holds every expert: 16 bytes more for each of the other half.
  const auto ddp = predict_memory(plan_for(GetParam(), "full", 1), mc, {1, 2});
  for (const char* kind : {"master", "gradients"})
    EXPECT_DOUBLE_EQ(ddp.gpu_bytes(kind) - m.gpu_bytes(kind), 4 * w.experts / 2) << kind;
  EXPECT_DOUBLE_EQ(ddp.gpu_bytes("moments") - m.gpu_bytes("moments"), 8 * w.experts / 2);

  const auto s = plan_summary(plan, mc, {1, 2});
  EXPECT_EQ(s["model"]["parameters"].get<double>(), w.dense + w.experts);
  EXPECT_EQ(s["model"]["per_rank"]["parameters"].get<double>(), mine);
  EXPECT_EQ(s["model"]["per_rank"]["trainable"].get<double>(), mine);
  double units = 0;
  for (const auto& u : s["units"]) units += u["params"].get<double>() * u["count"].get<double>();
  EXPECT_EQ(units, mine) << "the units line is this rank's";
  const auto text = plan_summary_text(s);
  EXPECT_NE(text.find(fmt::format("(per rank: {:.0f}, {:.0f} trainable)", mine, mine)), std::string::npos) << text;
}

// LoRA on attention: the frozen base in the compute dtype is this rank's (fp32 here: 4 bytes), the
// adapters are not experts and stay whole.
TEST_P(ExpertParallelPlan, LoraBaseIsTheDensePartAndHalfTheExperts) {
  const auto mc = model::load_model_config(fixture(GetParam()) + "/config.json");
  const auto w = count_written(GetParam(), mc.tie_word_embeddings);
  const auto plan = plan_for(GetParam(), "lora", 2);
  const auto m = predict_memory(plan, mc, {1, 2});
  EXPECT_DOUBLE_EQ(m.gpu_bytes("weights"), 4 * (w.dense + w.experts / 2));
  EXPECT_DOUBLE_EQ(m.gpu_bytes("master"), 4 * w.attention_lora);
  EXPECT_DOUBLE_EQ(m.gpu_bytes("moments"), 8 * w.attention_lora);
  EXPECT_EQ(static_cast<double>(parameter_counts(mc, plan.adapter, 2).trainable), w.attention_lora);
}

INSTANTIATE_TEST_SUITE_P(Families, ExpertParallelPlan,
                         ::testing::Values("qwen3_moe_tiny", "qwen2_moe_tiny", "mixtral_tiny"));

// Without expert parallelism, and on a dense model, the counts are the whole model's.
TEST(ExpertParallelPlan, SizeOneAndDenseModelsCountEverything) {
  const auto mc = model::load_model_config(fixture("qwen3_moe_tiny") + "/config.json");
  const auto w = count_written("qwen3_moe_tiny", false);
  const auto plan = plan_for("qwen3_moe_tiny", "full", 1);
  EXPECT_EQ(static_cast<double>(parameter_counts(mc, plan.adapter, 1).total), w.dense + w.experts);
  EXPECT_FALSE(plan_summary(plan, mc, {1, 2})["model"].contains("per_rank"));
  const auto dense = model::load_model_config(fixture("qwen3_tiny") + "/config.json");
  EXPECT_EQ(parameter_counts(dense, plan.adapter, 2).total, parameter_counts(dense, plan.adapter).total);
}

}  // namespace
}  // namespace lf::plan
