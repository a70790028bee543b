// Gemma 3 text and the RoPE scaling variants against transformers (scripts/fixtures/gemma_rope_fixtures.py,
// fp32 CPU): Gemma 3's logits, loss and every gradient (sliding layers with their own RoPE, sandwich
// (1+w) norms, GELU-tanh, scaled embeddings and queries), plain and checkpointed; yarn, linear and
// dynamic RoPE's logits; the save round trip loads in transformers.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "lf/model/fused_loss.h"
#include "lf/model/loader.h"
#include "lf/model/loss.h"
#include "lf/model/tensor_io.h"
#include "model_test_util.h"

namespace lf::model {
namespace {
using test::fixture;
using test::load_ref;
using test::rel_err;

TEST(Gemma3, LogitsLossAndEveryGradientAreTransformers) {
  for (const bool checkpointing : {false, true}) {
    auto model = load_causal_lm(fixture("gemma3_tiny").string(), LoadOptions{});
    EXPECT_EQ(model->layout().layers[2].attention.kind, AttentionKind::kFullCausal);
    EXPECT_EQ(model->layout().layers[3].attention.window, 4);
    model->set_gradient_checkpointing(checkpointing);
    for (auto& p : model->named_parameters()) p.tensor->set_requires_grad(true);
    const auto ref = load_ref("gemma3_ref.safetensors");
    at::Tensor loss;
    if (checkpointing) {
      loss = causal_lm_loss_fused(*model, model->hidden_states(ref.at("input_ids")), ref.at("labels"), false, 5);
    } else {
      const auto logits = model->forward(ref.at("input_ids"));
      EXPECT_LE(test::max_abs_diff(logits, ref.at("logits")), 1e-4);
      loss = causal_lm_loss(logits, ref.at("labels"));
    }
    EXPECT_NEAR(loss.item<double>(), ref.at("loss").item<double>(), 1e-5);
    loss.backward();
    int checked = 0;
    for (auto& p : model->named_parameters()) {
      const auto it = ref.find("grad." + p.name);
      ASSERT_NE(it, ref.end()) << p.name;
      EXPECT_LE(rel_err(p.tensor->grad(), it->second), 1e-4) << p.name;
      ++checked;
    }
    EXPECT_EQ(checked, 2 + 4 * 13);  // embedding, final norm; per layer q,k,v,o, q/k norms, 3 MLP, 4 norms
  }
}

TEST(Gemma3, SavedModelLoadsInTransformers) {
  test::TempDir tmp;
  auto model = load_causal_lm(fixture("gemma3_tiny").string(), LoadOptions{});
  SaveOptions so;
  so.copy_files_from = fixture("gemma3_tiny");
  save_causal_lm(*model, tmp.path(), so);
  const auto ids = load_ref("gemma3_ref.safetensors").at("input_ids");
  save_tensor_file(tmp.path() / "ours.safetensors",
                   {{"input_ids", ids}, {"logits", model->forward(ids).detach().contiguous()}});
  std::string log;
  const int rc = test::run_python("model_check_load.py",
                                  "--model " + tmp.path().string() + " --ours " + (tmp.path() / "ours.safetensors").string(),
                                  &log);
  if (rc == -1) GTEST_SKIP() << "LF_PYTHON not configured";
  EXPECT_EQ(rc, 0) << log;
}

class RopeVariant : public ::testing::TestWithParam<const char*> {};

TEST_P(RopeVariant, LogitsAreTransformers) {
  const std::string arch = GetParam();
  auto model = load_causal_lm(fixture(arch + "_tiny").string(), LoadOptions{});
  const auto ref = load_ref(arch + "_ref.safetensors");
  const auto logits = model->forward(ref.at("input_ids"));
  EXPECT_LE(test::max_abs_diff(logits, ref.at("logits")), 1e-4);
  EXPECT_NEAR(causal_lm_loss(logits, ref.at("labels")).item<double>(), ref.at("loss").item<double>(), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Variants, RopeVariant, ::testing::Values("qwen2_yarn", "llama_linear", "qwen3_dynamic"));

}  // namespace
}  // namespace lf::model
