// The host bytes offload will pin, predicted before the model loads (offload_host_bytes.h): the
// number run_training checks against MemAvailable and the cgroup's limit.
#include <gtest/gtest.h>

#include "lf/model/config.h"
#include "offload_host_bytes.h"

namespace lf::train {
namespace {

model::ModelConfig qwen25_1_5b() {
  return model::load_model_config(std::string(LF_SOURCE_DIR) + "/configs/models/qwen2.5-1.5b.json");
}

TEST(OffloadHostBytes, SixteenBytesATrainableParameterOverTheWorld) {
  config::TrainConfig c;
  c.finetuning_type = "full";
  c.offload = "optimizer";
  const auto mc = qwen25_1_5b();
  const double n = static_cast<double>(model::num_parameters(mc));
  EXPECT_NEAR(n, 1.5437e9, 1e6);
  EXPECT_DOUBLE_EQ(predict_offload_host_bytes(c, mc, 1).per_rank, 16 * n);
  EXPECT_DOUBLE_EQ(predict_offload_host_bytes(c, mc, 4).per_rank, 4 * n);
}

TEST(OffloadHostBytes, OffloadRatioScalesWhatIsPinned) {
  config::TrainConfig c;
  c.finetuning_type = "full";
  c.offload = "optimizer";
  const auto mc = qwen25_1_5b();
  const double all = predict_offload_host_bytes(c, mc, 2).per_rank;
  c.offload_ratio = 0.25;
  EXPECT_DOUBLE_EQ(predict_offload_host_bytes(c, mc, 2).per_rank, 0.25 * all);
  EXPECT_DOUBLE_EQ(predict_offload_host_bytes(c, mc, 2).trainable, all / 8);  // the count itself is not scaled
}

TEST(OffloadHostBytes, LoraCountsTheAdaptersOfEveryProjection) {
  config::TrainConfig c;
  c.finetuning_type = "lora";
  c.offload = "optimizer";
  c.lora_rank = 16;
  const auto mc = qwen25_1_5b();
  // r x (in + out) per projection: q, k, v, o, gate, up, down, over 28 layers.
  const double h = 1536, kv = 256, ff = 8960;
  const double per_layer = 16 * ((h + h) + (h + kv) + (h + kv) + (h + h) + 3 * (h + ff));
  const double bound = predict_offload_host_bytes(c, mc, 1).trainable;
  EXPECT_GE(bound, 28 * per_layer);  // never less than the adapters (an upper bound)
  EXPECT_LE(bound, 1.02 * 28 * per_layer);
  c.lora_rank = 8;
  EXPECT_DOUBLE_EQ(predict_offload_host_bytes(c, mc, 1).trainable, bound / 2);
}

}  // namespace
}  // namespace lf::train
