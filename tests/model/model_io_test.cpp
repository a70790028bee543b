// Saving: our files load back here and in transformers / peft with the same logits.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "lf/model/dora.h"
#include "lf/model/loader.h"
#include "lf/model/lora.h"
#include "lf/model/tensor_io.h"
#include "model_test_util.h"

namespace lf::model {
namespace {
namespace fs = std::filesystem;
using test::fixture;
using test::load_ref;

void perturb(at::Tensor& t, double scale, uint64_t seed) {
  c10::NoGradGuard g;
  auto gen = at::globalContext().defaultGenerator(at::kCPU);
  gen.set_current_seed(seed);
  t.add_(at::randn(t.sizes(), gen, t.options()) * scale);
}

// Writes input_ids + our logits for model_check_load.py.
fs::path write_ours(const fs::path& dir, const at::Tensor& ids, const at::Tensor& logits) {
  const fs::path p = dir / "ours.safetensors";
  save_tensor_file(p, {{"input_ids", ids}, {"logits", logits.detach().to(at::kFloat).contiguous()}});
  return p;
}

TEST(ModelIo, SavedFullModelReloadsAndLoadsInTransformers) {
  test::TempDir tmp;
  auto model = load_causal_lm(fixture("qwen2_tiny").string(), LoadOptions{});
  perturb(*model->named_parameters()[3].tensor, 0.1, 1);  // not just a copy of the input
  auto ids = load_ref("qwen2_ref.safetensors").at("input_ids");
  auto logits = model->forward(ids);
  SaveOptions so;
  so.max_shard_bytes = 30'000;  // several shards + index
  so.copy_files_from = fixture("qwen2_tiny");
  const fs::path out = tmp.path() / "full";
  save_causal_lm(*model, out, so);
  EXPECT_TRUE(fs::exists(out / "model.safetensors.index.json"));
  EXPECT_TRUE(fs::exists(out / "generation_config.json"));
  EXPECT_FALSE(fs::exists(out / "model.safetensors"));
  int shards = 0;
  for (const auto& e : fs::directory_iterator(out))
    if (e.path().extension() == ".safetensors") {
      ++shards;
      EXPECT_EQ(SafetensorsFile(e.path()).metadata().at("format"), "pt");
    }
  EXPECT_GE(shards, 2);
  auto back = load_causal_lm(out.string(), LoadOptions{});
  EXPECT_TRUE(at::equal(back->forward(ids), logits));

  std::string log;
  const fs::path ours = write_ours(tmp.path(), ids, logits);
  const int rc = test::run_python("model_check_load.py", "--model " + out.string() + " --ours " + ours.string(), &log);
  if (rc == -1) GTEST_SKIP() << "LF_PYTHON not configured: transformers check skipped (own reload passed)";
  EXPECT_EQ(rc, 0) << log;
}

TEST(ModelIo, SavedAdapterLoadsInPeft) {
  test::TempDir tmp;
  auto model = load_causal_lm(fixture("qwen2_tiny").string(), LoadOptions{});
  LoraConfig cfg;
  cfg.rank = 4;
  cfg.alpha = 8;
  cfg.target = parse_lora_target("q_proj, v_proj,down_proj");
  apply_lora(*model, cfg);
  for (auto& p : lora_parameters(*model)) perturb(*p.tensor, 0.3, p.name.size());  // B != 0
  auto ids = load_ref("qwen2_ref.safetensors").at("input_ids");
  auto logits = model->forward(ids);
  const fs::path out = tmp.path() / "adapter";
  save_lora_adapter(*model, cfg, out, fixture("qwen2_tiny").string());
  {
    std::ifstream in(out / "adapter_config.json");
    auto j = nlohmann::json::parse(in);
    EXPECT_EQ(j.at("r"), 4);
    EXPECT_EQ(j.at("peft_type"), "LORA");
    EXPECT_EQ(j.at("target_modules").size(), 3u);
  }
  auto back = load_causal_lm(fixture("qwen2_tiny").string(), LoadOptions{});
  load_lora_adapter(*back, out);
  EXPECT_TRUE(at::allclose(back->forward(ids), logits, 0, 1e-6));

  std::string log;
  const fs::path ours = write_ours(tmp.path(), ids, logits);
  const int rc = test::run_python(
      "model_check_load.py",
      "--model " + fixture("qwen2_tiny").string() + " --adapter " + out.string() + " --ours " + ours.string(), &log);
  if (rc == -1) GTEST_SKIP() << "LF_PYTHON not configured: peft check skipped (own reload passed)";
  EXPECT_EQ(rc, 0) << log;
}

// DoRA (use_dora): saved under peft's names (lora_magnitude_vector after lora_A / lora_B), use_dora
// in adapter_config.json; peft loads it with exactly our keys and computes our logits.
TEST(ModelIo, SavedDoraAdapterLoadsInPeft) {
  test::TempDir tmp;
  auto model = load_causal_lm(fixture("qwen2_tiny").string(), LoadOptions{});
  LoraConfig cfg;
  cfg.rank = 4;
  cfg.alpha = 8;
  cfg.use_dora = true;
  cfg.target = parse_lora_target("q_proj,v_proj,down_proj");
  apply_lora(*model, cfg);
  // The magnitude starts as the row norms of W (peft's get_weight_norm with B = 0).
  const auto& q = model->layers()[0].self_attn_.q_proj_;
  ASSERT_TRUE(q.lora_->magnitude_.defined());
  EXPECT_TRUE(at::allclose(q.lora_->magnitude_, at::linalg_vector_norm(q.weight_, 2, at::IntArrayRef{1}), 1e-6, 0));
  for (auto& p : lora_parameters(*model)) perturb(*p.tensor, 0.3, p.name.size());  // B != 0, m != ||W||
  auto ids = load_ref("qwen2_ref.safetensors").at("input_ids");
  auto logits = model->forward(ids);
  const fs::path out = tmp.path() / "adapter";
  save_lora_adapter(*model, cfg, out, fixture("qwen2_tiny").string());
  {
    std::ifstream in(out / "adapter_config.json");
    auto j = nlohmann::json::parse(in);
    EXPECT_EQ(j.at("use_dora"), true);
    const SafetensorsFile f(out / "adapter_model.safetensors");
    EXPECT_NE(f.find("base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector"), nullptr);
    EXPECT_EQ(f.tensors().size(), 2u * 3u * 3u);  // 2 layers x 3 modules x (A, B, magnitude)
  }
  auto back = load_causal_lm(fixture("qwen2_tiny").string(), LoadOptions{});
  const auto loaded = load_lora_adapter(*back, out);
  EXPECT_TRUE(loaded.use_dora);
  EXPECT_TRUE(at::allclose(back->forward(ids), logits, 0, 1e-6));

  std::string log;
  const fs::path ours = write_ours(tmp.path(), ids, logits);
  const int rc = test::run_python(
      "model_check_load.py",
      "--model " + fixture("qwen2_tiny").string() + " --adapter " + out.string() + " --ours " + ours.string(), &log);
  if (rc == -1) GTEST_SKIP() << "LF_PYTHON not configured: peft check skipped (own reload passed)";
  EXPECT_EQ(rc, 0) << log;
}

// peft's DoRA forward, term by term, on one Linear with a bias: without dropout (or in eval)
// y = Wx + b + (s - 1) Wx + s (B A x) scaling; with dropout in training the two DoRA terms take the
// dropped-out x while Wx + b keeps x; s = m / ||W + scaling B A||_c, detached: A and B get no
// gradient through the norm.
TEST(ModelIo, DoraForwardIsPeftsWithItsDropoutAndDetach) {
  auto gen = at::detail::createCPUGenerator(5);
  auto rnd = [&](std::vector<int64_t> shape) { return at::randn(shape, gen, at::TensorOptions().dtype(at::kFloat)); };
  Linear lin;
  lin.weight_ = rnd({6, 5});
  lin.bias_ = rnd({6});
  lin.lora_ = std::make_unique<LoraWeights>();
  auto& l = *lin.lora_;
  l.a_ = rnd({2, 5}).set_requires_grad(true);
  l.b_ = rnd({6, 2}).set_requires_grad(true);
  l.magnitude_ = (rnd({6}).abs() + 1).set_requires_grad(true);
  l.scaling_ = 2.0;
  const auto x = rnd({3, 4, 5});
  auto expected = [&](const at::Tensor& xd) {
    const auto ba = at::matmul(l.b_, l.a_).detach();
    const auto s = l.magnitude_ / at::linalg_vector_norm(lin.weight_ + l.scaling_ * ba, 2, at::IntArrayRef{1});
    const auto lora = at::linear(at::linear(xd, l.a_), l.b_);
    return at::linear(x, lin.weight_, lin.bias_) + (s - 1) * at::linear(xd, lin.weight_) + s * lora * l.scaling_;
  };
  auto grads = [&](const at::Tensor& y) {
    for (auto* t : {&l.a_, &l.b_, &l.magnitude_}) t->mutable_grad() = at::Tensor();
    (y * at::arange(y.numel(), y.options()).view(y.sizes()).cos()).sum().backward();
    return std::vector<at::Tensor>{l.a_.grad().clone(), l.b_.grad().clone(), l.magnitude_.grad().clone()};
  };
  for (const double p : {0.0, 0.4}) {
    SCOPED_TRACE("dropout " + std::to_string(p));
    l.dropout_ = p;
    at::manual_seed(11);
    const auto y = lin.forward(x, /*training=*/true);
    at::manual_seed(11);
    const auto want = expected(p > 0 ? at::dropout(x, p, true) : x);
    EXPECT_TRUE(at::allclose(y, want, 1e-5, 1e-6));
    const auto g = grads(y), gw = grads(want);
    for (size_t i = 0; i < g.size(); ++i) EXPECT_TRUE(at::allclose(g[i], gw[i], 1e-5, 1e-6)) << "gradient " << i;
    EXPECT_TRUE(at::allclose(lin.forward(x, /*training=*/false), expected(x), 1e-5, 1e-6));  // eval: no dropout
  }
  // merge_and_unload's weight: (m / ||W + dW||_c) (W + dW) gives the eval forward.
  const auto merged = dora_merged_weight(lin.weight_, l.a_, l.b_, l.magnitude_, l.scaling_);
  EXPECT_TRUE(at::allclose(at::linear(x, merged, lin.bias_), lin.forward(x, false), 1e-5, 1e-5));
}

TEST(ModelIo, LoraAlphaDefaultsToTwiceRank) {
  LoraConfig c;
  c.rank = 16;
  EXPECT_DOUBLE_EQ(c.effective_alpha(), 32.0);
  auto model = load_causal_lm(fixture("llama_tiny").string(), LoadOptions{});
  apply_lora(*model, c);
  EXPECT_DOUBLE_EQ(model->layers()[0].self_attn_.q_proj_.lora_->scaling_, 2.0);
  EXPECT_FALSE(model->layers()[0].self_attn_.q_proj_.weight_.requires_grad());
  EXPECT_TRUE(model->layers()[0].linears().back().second->lora_->a_.requires_grad());  // down_proj
}

TEST(ModelIo, Fp16RoundTripKeepsHalfPrecisionValues) {
  test::TempDir tmp;
  auto model = load_causal_lm(fixture("llama_tiny").string(), LoadOptions{});
  SaveOptions so;
  so.dtype = at::kHalf;
  save_causal_lm(*model, tmp.path(), so);
  EXPECT_EQ(SafetensorsFile(tmp.path() / "model.safetensors").tensors().front().dtype, StDtype::kF16);
  auto back = load_causal_lm(tmp.path().string(), LoadOptions{});
  auto a = model->named_parameters(), b = back->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(at::equal(a[i].tensor->to(at::kHalf).to(at::kFloat), *b[i].tensor)) << a[i].name;
}

TEST(ModelIo, LoraDropoutOnlyWhileTraining) {
  auto model = load_causal_lm(fixture("qwen2_tiny").string(), LoadOptions{});
  LoraConfig cfg;
  cfg.rank = 4;
  cfg.dropout = 0.5;
  apply_lora(*model, cfg);
  for (auto& p : lora_parameters(*model)) perturb(*p.tensor, 0.3, 3);
  auto ids = load_ref("qwen2_ref.safetensors").at("input_ids");
  auto eval1 = model->forward(ids), eval2 = model->forward(ids);
  EXPECT_TRUE(at::equal(eval1, eval2));
  model->set_training(true);
  EXPECT_FALSE(at::allclose(model->forward(ids), eval1));
}

TEST(ModelIo, MisalignedOffsetsReadCorrectly) {
  test::TempDir tmp;
  // One I8 tensor of 3 bytes first, so the F32 tensor after it starts at an odd offset.
  const int8_t small[3] = {1, 2, 3};
  const float values[4] = {1.5f, -2.25f, 3.0f, 1e-3f};
  StWriteTensor a, b;
  a.name = "a";
  a.dtype = StDtype::kI8;
  a.shape = {3};
  a.data = small;
  a.nbytes = 3;
  b.name = "b";
  b.dtype = StDtype::kF32;
  b.shape = {2, 2};
  b.data = values;
  b.nbytes = 16;
  write_safetensors(tmp.path() / "m.safetensors", {a, b});
  auto t = load_tensor_file(tmp.path() / "m.safetensors");
  SafetensorsFile f(tmp.path() / "m.safetensors");
  EXPECT_NE(reinterpret_cast<uintptr_t>(f.data(*f.find("b"))) % 4, 0u) << "the test needs a misaligned tensor";
  EXPECT_TRUE(at::equal(t.at("b"), at::tensor({1.5f, -2.25f, 3.0f, 1e-3f}).view({2, 2})));
  EXPECT_EQ(t.at("a")[2].item<int>(), 3);
}

}  // namespace
}  // namespace lf::model
