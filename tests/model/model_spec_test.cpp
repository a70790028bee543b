// The model spec's seam on the torch side: CausalLM is its family's layout (names, units, LoRA's
// modules), and a parameter held fused is read from and written to its several HF tensors.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "lf/model/loader.h"
#include "lf/model/lora.h"
#include "lf/model/tensor_io.h"
#include "model_test_util.h"

namespace lf::model {
namespace {
using test::fixture;

class FamilyModel : public ::testing::TestWithParam<const char*> {};

TEST_P(FamilyModel, ParametersCarryTheLayoutsNamesAndUnits) {
  auto model = load_causal_lm(fixture(GetParam()).string(), LoadOptions{});
  const auto& layout = model->layout();
  const auto params = model->named_parameters();
  ASSERT_EQ(params.size(), layout.params.size());
  for (size_t k = 0; k < params.size(); ++k) {
    EXPECT_EQ(params[k].name, layout.params[k].name);
    EXPECT_EQ(params[k].unit, layout.params[k].unit);
    EXPECT_EQ(params[k].tensor->sizes().vec(), layout.params[k].shape);
  }
  EXPECT_EQ(params.front().unit, 0);
  EXPECT_EQ(params.back().unit, model->head_unit());
  LoraConfig c;
  c.target = {"all"};
  apply_lora(*model, c);
  const auto lora = lora_parameters(*model);
  ASSERT_EQ(lora.size(), 2 * layout.linears.size());
  for (size_t k = 0; k < lora.size(); ++k) {
    const auto& l = layout.linears[k / 2];
    EXPECT_EQ(lora[k].name, "base_model.model." + l.module + (k % 2 ? ".lora_B.weight" : ".lora_A.weight"));
    EXPECT_EQ(lora[k].unit, l.layer + 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyModel, ::testing::Values("llama_tiny", "qwen2_tiny", "qwen3_tiny", "mistral_tiny"));

// Experts held as one [E, out, in] tensor, stored by HF as E tensors of [out, in]: each written
// from one fetch of the whole value, each read back into its slice.
TEST(ModelSpec, AFusedParameterRoundTripsThroughItsHfTensors) {
  test::TempDir tmp;
  ParamSpec p;
  p.name = "model.layers.0.mlp.experts.down_proj";
  p.shape = {3, 2, 4};
  for (int e = 0; e < 3; ++e) p.hf.push_back({"model.layers.0.mlp.experts." + std::to_string(e) + ".down_proj.weight", {2, 4}});
  const auto value = at::arange(24, at::kFloat).view({3, 2, 4});
  int fetches = 0;
  save_lazy_tensors(tmp.path(), hf_lazy_tensors(p, at::kBFloat16, [&] { return ++fetches, value; }), 20, "model");
  EXPECT_EQ(fetches, 1);
  SafetensorsCheckpoint ckpt(tmp.path());
  EXPECT_EQ(ckpt.num_files(), 3u);  // 16-byte pieces, 20-byte shards: one fetch serves three files
  ASSERT_EQ(ckpt.names().size(), 3u);
  EXPECT_EQ(ckpt.info(p.hf[1].name).shape, (std::vector<int64_t>{2, 4}));
  EXPECT_TRUE(at::equal(read_tensor(ckpt.info(p.hf[2].name), ckpt.data(p.hf[2].name)).to(at::kFloat), value[2]));
  auto back = at::zeros({3, 2, 4});
  read_hf_tensors(p, ckpt, back);
  EXPECT_TRUE(at::equal(back, value));
}

}  // namespace
}  // namespace lf::model
