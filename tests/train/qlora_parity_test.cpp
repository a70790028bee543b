// QLoRA against LLaMA-Factory 0.9.5's own QLoRA run on the CPU (tests/fixtures/train/lf_qlora, made by
// scripts/fixtures/lf_qlora_reference.py: transformers + bitsandbytes quantize its tiny Qwen2's decoder
// linears to NF4 with double quantization at load, peft adds LoRA after set_seed(7), HF Trainer trains).
// lf-train's load with quantization (bnb4_linear.h) stores the same bytes, draws the same adapter, and
// the run is the same: loss and grad_norm per step within 1e-5 relative, and the final adapter.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "lf/model/bnb4_linear.h"
#include "lf/model/kernel_paths.h"
#include "lf/model/loader.h"
#include "lf/common/error.h"
#include "lf/model/lora.h"
#include "lf/model/tensor_io.h"
#include "lf/train/trainer.h"
#include "train_test_util.h"

namespace lf::train {
namespace {

using testing::fixture_config;
using testing::fixture_dataset;
using testing::fixtures;
using testing::read_json;

TrainSummary train_qlora(const config::JobPlan& c, model::CausalLM& m, const model::LoraConfig& lc,
                         const TokenizedDataset& data) {
  TrainerSetup s;
  s.plan = c;
  s.model = &m;
  s.lora = lc;
  s.train = &data;
  s.pad_id = 0;
  s.write_outputs = false;
  s.progress = false;
  Trainer t(std::move(s));
  return t.train();
}

std::unique_ptr<model::CausalLM> load_quantized(const config::JobPlan& c) {
  model::LoadOptions lo;
  lo.quantize = model::bnb4_spec_of(c.precision);
  return model::load_causal_lm(c.model.model_name_or_path, lo);
}

TEST(QloraParity, BaseIsBitsandbytesBytes) {
  at::set_num_threads(1);  // the offset's mean, summed as the reference's one thread
  auto c = fixture_config("lora");
  c.model.model_name_or_path = (fixtures() / "lf_qlora" / "model").string();
  c.precision.quantization_bit = 4;
  auto m = load_quantized(c);
  const auto want = model::load_tensor_file(fixtures() / "lf_qlora" / "base.safetensors");
  size_t seen = 0;
  for (const auto& p : m->named_parameters()) {
    auto it = want.find(p.name);
    if (it == want.end()) continue;
    ++seen;
    EXPECT_TRUE(at::equal(p.tensor->reshape(it->second.sizes()), it->second)) << p.name;
  }
  EXPECT_EQ(seen, want.size());
  const auto r = model::quantized_base(*m);
  EXPECT_EQ(r.linears, 14);
  EXPECT_TRUE(r.double_quant);
  EXPECT_EQ(r.format, "nf4");
  EXPECT_LT(r.stored_bytes * 6, r.dense_bytes);  // fp32 weights: 32 bits -> about 4.5
}

TEST(QloraParity, IsLlamaFactorysRun) {
  at::set_num_threads(1);
  const auto dir = fixtures() / "lf_qlora";
  const auto ref = read_json(dir / "expected.json");
  const auto& s = ref["settings"];
  auto c = fixture_config("lora");
  c.optim.learning_rate = s["learning_rate"];
  c.optim.max_grad_norm = s["max_grad_norm"];
  c.model.model_name_or_path = (dir / "model").string();
  c.precision.quantization_bit = 4;
  c.precision.quantization_type = s["quantization_type"];
  c.precision.double_quantization = s["double_quantization"];
  auto m = load_quantized(c);
  model::LoraConfig lc;
  lc.rank = s["lora_rank"];
  lc.alpha = s["lora_alpha"].get<double>();
  lc.seed = s["seed"];
  model::apply_lora(*m, lc);
  const auto init = model::load_tensor_file(dir / "initial.safetensors");
  for (const auto& p : model::lora_parameters(*m)) {
    auto it = init.find(p.name);
    ASSERT_NE(it, init.end()) << p.name;
    EXPECT_TRUE(at::equal(*p.tensor, it->second)) << p.name << ": not LLaMA-Factory's initial value";
  }
  const auto data = fixture_dataset();
  const auto sum = train_qlora(c, *m, lc, data);
  const auto& want = ref["qlora"];
  ASSERT_EQ(sum.steps.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double loss = want[i]["loss"], gn = want[i]["grad_norm"];
    EXPECT_EQ(sum.steps[i].step, want[i]["step"].get<int64_t>());
    EXPECT_NEAR(sum.steps[i].lr, want[i]["lr"].get<double>(), 1e-9);
    worst = std::max({worst, std::fabs(sum.steps[i].loss - loss) / loss, std::fabs(sum.steps[i].grad_norm - gn) / gn});
  }
  std::printf("QLoRA: max relative |loss, grad_norm - LLaMA-Factory's| over %zu steps: %.3g\n", want.size(), worst);
  EXPECT_LT(worst, 1e-5);
  const auto fin = model::load_tensor_file(dir / "final.safetensors");
  double diff = 0;
  for (const auto& p : model::lora_parameters(*m))
    diff = std::max(diff, (p.tensor->to(at::kDouble) - fin.at(p.name).to(at::kDouble)).abs().max().item<double>());
  std::printf("QLoRA: max |adapter - LLaMA-Factory's| %.3g\n", diff);
  EXPECT_LT(diff, 1e-5);
  // Not the run on the unquantized base: the 4 bits are felt.
  auto dense = model::load_causal_lm(c.model.model_name_or_path, {});
  model::apply_lora(*dense, lc);
  auto c16 = c;
  c16.precision.quantization_bit.reset();
  const auto plain = train_qlora(c16, *dense, lc, data);
  EXPECT_GT(std::fabs(sum.steps.back().loss - plain.steps.back().loss), 1e-4);
}

// The 4-bit layer's forward and input gradient are bitsandbytes' MatMul4Bit: x W^T + b with W
// dequantized, and g W; the dense layer over the dequantized weight gives the same bits.
TEST(QloraParity, LinearIsDequantizedGemm) {
  at::manual_seed(3);
  model::Linear dense, q;
  dense.weight_ = at::randn({48, 64}) * 0.05;
  dense.bias_ = at::randn({48}) * 0.1;
  q.bias_ = dense.bias_;
  q.format_ = model::make_bnb4_linear(quant::quantize_4bit(dense.weight_, quant::Bnb4Spec{}), at::kFloat);
  dense.weight_ = q.format_->dequantize(at::kFloat);
  auto x = at::randn({2, 5, 64}).set_requires_grad(true);
  auto xq = x.detach().clone().set_requires_grad(true);
  auto y = dense.forward(x, true), yq = q.forward(xq, true);
  EXPECT_TRUE(at::equal(y, yq));
  const auto g = at::randn_like(y);
  y.backward(g);
  yq.backward(g);
  EXPECT_TRUE(at::equal(x.grad(), xq.grad()));
  EXPECT_EQ(q.out_features(), 48);
  EXPECT_EQ(q.in_features(), 64);
}

}  // namespace
}  // namespace lf::train

namespace lf::train {
namespace {

// A folder transformers saved with the model loaded in 4 bits (lf_qlora/bnb4: quantization_config in
// config.json, the codes stored as float32 words as LLaMA-Factory's quant storage makes them) loads
// as it is: the same bytes as quantizing the dense folder at load, and the same forward.
TEST(QloraParity, SavedBitsandbytesFolderLoadsAsItIs) {
  at::set_num_threads(1);
  const auto dir = testing::fixtures() / "lf_qlora";
  auto saved = model::load_causal_lm((dir / "bnb4").string(), {});
  model::LoadOptions lo;
  lo.quantize = quant::Bnb4Spec{};
  auto fresh = model::load_causal_lm((dir / "model").string(), lo);
  const auto r = model::quantized_base(*saved);
  EXPECT_EQ(r.linears, 14);
  EXPECT_TRUE(r.double_quant);
  auto a = saved->named_parameters(), b = fresh->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].name, b[k].name);
    EXPECT_TRUE(at::equal(a[k].tensor->reshape({-1}), b[k].tensor->reshape({-1}))) << a[k].name;
  }
  const auto ids = at::randint(0, 96, {2, 9}, at::kLong);
  EXPECT_TRUE(at::equal(saved->forward(ids), fresh->forward(ids)));
}

}  // namespace
}  // namespace lf::train

namespace lf::train {
namespace {

// LF_QUANT_GEMM=fused asks for a CUDA kernel: a CPU run says so instead of silently dequantizing.
TEST(QloraParity, AFusedGemmAskedForOnTheCpuIsAnError) {
  model::Linear lin;
  lin.format_ = model::make_bnb4_linear(quant::quantize_4bit(at::randn({16, 64}), quant::Bnb4Spec{}), at::kFloat);
  config::KernelPaths k;
  k.quant_gemm = "fused";
  const model::ScopedKernelPaths paths(k);
  try {
    (void)lin.forward(at::randn({2, 64}), false);
    ADD_FAILURE() << "LF_QUANT_GEMM=fused ran on the CPU";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("LF_QUANT_GEMM=fused: the fused 4-bit GEMM is a CUDA kernel"), std::string::npos)
        << e.what();
  }
  k.quant_gemm = "dequant";
  const model::ScopedKernelPaths exact(k);
  EXPECT_EQ(lin.forward(at::randn({2, 64}), false).sizes(), (at::IntArrayRef{2, 16}));
}

}  // namespace
}  // namespace lf::train
