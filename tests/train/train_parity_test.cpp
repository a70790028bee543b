// The trainer against HF Trainer (+ peft) on the same tiny Qwen2, data, order and
// settings (gradient accumulation 2 over sequences of different lengths, clipping
// that clips, weight decay with biases, warmup + cosine, fp32 on CPU); see
// scripts/fixtures/train_hf_reference.py.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "lf/model/loader.h"
#include "lf/model/lora.h"
#include "lf/model/tensor_io.h"
#include "lf/parallel/make_strategy.h"
#include "lf/train/trainer.h"
#include "train_test_util.h"

namespace lf::train {
namespace {

using testing::fixture_config;
using testing::fixture_dataset;
using testing::fixtures;
using testing::read_json;

void expect_steps_match(const TrainSummary& got, const nlohmann::json& want) {
  ASSERT_EQ(got.steps.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(got.steps[i].loss - want[i]["loss"].get<double>()));
  std::printf("max |loss - HF loss| over %zu steps: %.3g\n", want.size(), worst);
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& w = want[i];
    const auto& g = got.steps[i];
    SCOPED_TRACE("step " + std::to_string(i + 1));
    EXPECT_EQ(g.step, w["step"].get<int64_t>());
    EXPECT_NEAR(g.loss, w["loss"].get<double>(), 1e-4);
    EXPECT_NEAR(g.lr, w["lr"].get<double>(), 1e-9);
    EXPECT_NEAR(g.grad_norm, w["grad_norm"].get<double>(), 1e-4 * std::max(1.0, w["grad_norm"].get<double>()));
    EXPECT_NEAR(g.epoch, w["epoch"].get<double>(), 1e-9);
  }
}

void expect_weights_match(const std::vector<model::NamedParam>& params, const std::filesystem::path& file) {
  const auto ref = model::load_tensor_file(file);
  size_t matched = 0;
  double worst = 0;
  for (const auto& p : params) {
    auto it = ref.find(p.name);
    ASSERT_NE(it, ref.end()) << p.name << " missing from " << file;
    const double diff = (p.tensor->detach().to(at::kDouble) - it->second.to(at::kDouble)).abs().max().item<double>();
    EXPECT_LT(diff, 1e-4) << p.name;
    worst = std::max(worst, diff);
    ++matched;
  }
  std::printf("max |weight - HF weight| over %zu tensors: %.3g\n", matched, worst);
  EXPECT_EQ(matched, ref.size());
}

// Two ranks as threads, through the ParallelStrategy seam: a strategy of the test's own (the
// interface is all the trainer sees) whose after_backward sums the two models' gradients and
// whose all_reduce_sums adds the two ranks' scalars, the rest a single-process strategy's.
class ThreadPairStrategy final : public parallel::ParallelStrategy {
 public:
  ThreadPairStrategy(int rank, std::unique_ptr<parallel::ParallelStrategy> local, std::function<void()> sum_grads,
                     std::function<double(double)> sum_scalar)
      : ParallelStrategy(rank, 2), local_(std::move(local)), sum_grads_(std::move(sum_grads)),
        sum_scalar_(std::move(sum_scalar)) {}
  std::string describe() const override { return "two threads"; }
  void before_micro_step(bool) override {}
  void after_backward() override { sum_grads_(); }
  std::vector<double> all_reduce_sums(std::vector<double> v) override {
    for (auto& x : v) x = sum_scalar_(x);
    return v;
  }
  at::Tensor all_gather_bytes(const at::Tensor& mine) override { return local_->all_gather_bytes(mine); }
  bool unscale_gradients(double scale) override { return local_->unscale_gradients(scale); }
  double clip_grad_norm(double max_norm) override { return local_->clip_grad_norm(max_norm); }
  void optimizer_step(double lr) override { local_->optimizer_step(lr); }
  void zero_grad() override { local_->zero_grad(); }
  int64_t optimizer_steps() const override { return local_->optimizer_steps(); }
  int64_t num_trainable() const override { return local_->num_trainable(); }
  std::vector<std::string> save_optimizer_state(const std::filesystem::path& d) override {
    return local_->save_optimizer_state(d);
  }
  void load_optimizer_state(const std::filesystem::path& d, int64_t n) override { local_->load_optimizer_state(d, n); }
  at::Tensor full_parameter(const std::string& name) override { return local_->full_parameter(name); }
  void load_full_parameter(const std::string& name, const at::Tensor& v) override {
    local_->load_full_parameter(name, v);
  }

 private:
  std::unique_ptr<parallel::ParallelStrategy> local_;
  std::function<void()> sum_grads_;
  std::function<double(double)> sum_scalar_;
};

TrainSummary run(const config::JobPlan& c, model::CausalLM& m, std::optional<model::LoraConfig> lora,
                 const TokenizedDataset& data) {
  TrainerSetup s;
  s.plan = c;
  s.model = &m;
  s.lora = std::move(lora);
  s.train = &data;
  s.pad_id = 0;
  s.write_outputs = false;
  s.progress = false;
  s.loss_chunk_rows = 7;  // several chunks per micro-batch
  Trainer t(std::move(s));
  return t.train();
}

TEST(TrainParity, FullFineTuningMatchesHfTrainer) {
  const auto data = fixture_dataset();
  const auto c = fixture_config("full");
  auto m = model::load_causal_lm(c.model.model_name_or_path, {});
  const auto sum = run(c, *m, std::nullopt, data);
  expect_steps_match(sum, read_json(fixtures() / "expected.json")["full"]);
  expect_weights_match(m->named_parameters(), fixtures() / "full_final.safetensors");
}

TEST(TrainParity, FullWithGradientCheckpointingMatchesToo) {
  const auto data = fixture_dataset();
  auto c = fixture_config("full");
  c.model.gradient_checkpointing = true;
  auto m = model::load_causal_lm(c.model.model_name_or_path, {});
  const auto sum = run(c, *m, std::nullopt, data);
  expect_steps_match(sum, read_json(fixtures() / "expected.json")["full"]);
  expect_weights_match(m->named_parameters(), fixtures() / "full_final.safetensors");
}

TEST(TrainParity, LoraMatchesPeftUnderHfTrainer) {
  const auto data = fixture_dataset();
  auto c = fixture_config("lora");
  c.model.gradient_checkpointing = true;  // LoRA + frozen embedding input: the checkpoint must still backprop
  auto m = model::load_causal_lm(c.model.model_name_or_path, {});
  auto lc = model::load_lora_adapter(*m, fixtures() / "lora_init");
  const auto sum = run(c, *m, lc, data);
  expect_steps_match(sum, read_json(fixtures() / "expected.json")["lora"]);
  expect_weights_match(model::lora_parameters(*m), fixtures() / "lora_final.safetensors");
  // The frozen base did not move.
  const auto base = model::load_tensor_file(fixtures() / "qwen2_tiny" / "model.safetensors");
  for (const auto& p : m->named_parameters())
    EXPECT_TRUE(at::equal(p.tensor->detach(), base.at(p.name))) << p.name;
}

// LLaMA-Factory's own adapters (scripts/fixtures/lf_lora_init_reference.py: its loader, peft's
// get_peft_model after set_seed): apply_lora from the same seed draws the same A, to the bit, on the
// modules peft targets for the same lora_target (and saves the same modules_to_save for
// additional_target); with B and the saved modules set as the fixture's, the logits are peft's (its
// scaling, rsLoRA's included). adapter_name_or_path: an adapter merged into the base, then a new
// one drawn after it (the same generator), or the adapter itself trained on.
TEST(TrainParity, LoraInitIsLlamaFactorysFromTheSameSeed) {
  const auto cases = read_json(fixtures() / "lf_lora_init" / "cases.json");
  ASSERT_GE(cases.size(), 4u);
  for (const auto& [name, cs] : cases.items()) {
    SCOPED_TRACE(name);
    auto m = model::load_causal_lm((fixtures() / "qwen2_tiny").string(), {});
    model::LoraConfig lc;
    lc.rank = cs["lora_rank"];
    lc.alpha = cs["lora_alpha"].get<double>();
    lc.target = model::parse_lora_target(cs["lora_target"]);
    lc.use_rslora = cs.value("use_rslora", false);
    if (cs.contains("additional_target")) lc.modules_to_save = model::parse_lora_target(cs["additional_target"]);
    lc.seed = cs["seed"];
    if (cs.contains("adapter_name_or_path"))  // merged, or trained on, as LLaMA-Factory does
      model::prepare_lora(*m, lc, {fixtures() / "lf_lora_init" / cs["adapter_name_or_path"].get<std::string>()},
                          cs.value("create_new_adapter", false));
    else
      model::apply_lora(*m, lc);
    auto want = model::load_tensor_file(fixtures() / "lf_lora_init" / (name + ".safetensors"));
    const auto input_ids = want.at("input_ids"), logits = want.at("logits");
    want.erase("input_ids");
    want.erase("logits");
    const auto got = model::lora_parameters(*m);
    ASSERT_EQ(got.size(), want.size());
    c10::NoGradGuard no_grad;
    for (const auto& p : got) {
      auto it = want.find(p.name);
      ASSERT_NE(it, want.end()) << p.name << ": a module peft does not target";
      if (p.name.find("lora_A") != std::string::npos)
        EXPECT_TRUE(at::equal(*p.tensor, it->second)) << p.name << ": not LLaMA-Factory's initial value";
      else
        p.tensor->copy_(it->second);
    }
    m->set_training(false);
    const double diff = (m->forward(input_ids) - logits).abs().max().item<double>();
    EXPECT_LT(diff, 1e-5) << "logits differ from peft's";
  }
}

// LoRA+ (loraplus_lr_ratio): LLaMA-Factory's own optimizer groups under HF Trainer
// (scripts/fixtures/train_hf_loraplus_reference.py), from the LoRA reference's initial adapter.
TEST(TrainParity, LoraPlusMatchesLlamaFactorysOptimizer) {
  const auto data = fixture_dataset();
  auto c = fixture_config("lora");
  const auto ref = read_json(fixtures() / "expected_loraplus.json");
  c.optim.loraplus_lr_ratio = ref["settings"]["loraplus_lr_ratio"];
  auto m = model::load_causal_lm(c.model.model_name_or_path, {});
  auto lc = model::load_lora_adapter(*m, fixtures() / "lora_init");
  const auto sum = run(c, *m, lc, data);
  expect_steps_match(sum, ref["lora"]);
  // Not the plain LoRA run: the ratio is felt.
  const auto plain = read_json(fixtures() / "expected.json")["lora"];
  EXPECT_GT(std::fabs(sum.steps.back().loss - plain.back()["loss"].get<double>()), 1e-4);
}

// The same seed, the same run: the LoRA reference run (peft + HF Trainer, scripts/fixtures/
// train_hf_reference.py) drew its adapter after torch.manual_seed(7); lf-train's apply_lora with
// seed 7 draws that adapter, and the run that follows is the reference's, step by step.
TEST(TrainParity, LoraFromTheSeedIsTheSameRunAsPeft) {
  const auto data = fixture_dataset();
  auto c = fixture_config("lora");
  const auto s = read_json(fixtures() / "expected.json")["settings"]["lora"];
  auto m = model::load_causal_lm(c.model.model_name_or_path, {});
  model::LoraConfig lc;
  lc.rank = s["lora_rank"];
  lc.alpha = s["lora_alpha"].get<double>();
  lc.seed = 7;
  model::apply_lora(*m, lc);
  const auto init = model::load_tensor_file(fixtures() / "lora_init" / "adapter_model.safetensors");
  for (const auto& p : model::lora_parameters(*m))
    ASSERT_TRUE(at::equal(*p.tensor, init.at(p.name))) << p.name << ": not peft's initial value for seed 7";
  const auto sum = run(c, *m, lc, data);
  const auto want = read_json(fixtures() / "expected.json")["lora"];
  expect_steps_match(sum, want);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(sum.steps[i].loss, want[i]["loss"].get<double>(), 1e-6) << "step " << i + 1;
}

// DoRA (use_dora): LLaMA-Factory's own run (scripts/fixtures/lf_dora_reference.py: its loader with
// use_dora after set_seed(7), then HF Trainer on the fixture's data and settings). apply_lora with
// use_dora from seed 7 draws the same adapter (A as LoRA's, B = 0, the magnitude ||W||_c), and the
// run is the same: loss and grad_norm per step to ~1e-6 relative, and the final adapter.
TEST(TrainParity, DoraIsLlamaFactorysRun) {
  const auto dir = fixtures() / "lf_dora";
  const auto ref = read_json(dir / "expected.json");
  const auto& s = ref["settings"];
  const auto data = fixture_dataset();
  auto c = fixture_config("lora");
  c.optim.learning_rate = s["learning_rate"];
  c.optim.max_grad_norm = s["max_grad_norm"];
  auto m = model::load_causal_lm(c.model.model_name_or_path, {});
  model::LoraConfig lc;
  lc.rank = s["lora_rank"];
  lc.alpha = s["lora_alpha"].get<double>();
  lc.seed = s["seed"];
  lc.use_dora = true;
  model::apply_lora(*m, lc);
  const auto init = model::load_tensor_file(dir / "initial.safetensors");
  const auto params = model::lora_parameters(*m);
  ASSERT_EQ(params.size(), init.size());
  for (const auto& p : params) {
    auto it = init.find(p.name);
    ASSERT_NE(it, init.end()) << p.name << ": not a tensor peft saves";
    if (p.name.ends_with("lora_magnitude_vector"))  // the row norms: the same to rounding
      EXPECT_TRUE(at::allclose(*p.tensor, it->second, 1e-6, 0)) << p.name;
    else
      EXPECT_TRUE(at::equal(*p.tensor, it->second)) << p.name << ": not LLaMA-Factory's initial value";
  }
  const auto sum = run(c, *m, lc, data);
  const auto& want = ref["dora"];
  expect_steps_match(sum, want);
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double loss = want[i]["loss"], gn = want[i]["grad_norm"];
    worst = std::max({worst, std::fabs(sum.steps[i].loss - loss) / loss, std::fabs(sum.steps[i].grad_norm - gn) / gn});
  }
  std::printf("DoRA: max relative |loss, grad_norm - LLaMA-Factory's| over %zu steps: %.3g\n", want.size(), worst);
  EXPECT_LT(worst, 2e-6);
  expect_weights_match(model::lora_parameters(*m), dir / "final.safetensors");
  // Not the plain LoRA run from the same seed: the magnitudes are felt.
  const auto plain = read_json(fixtures() / "expected.json")["lora"];
  EXPECT_GT(std::fabs(sum.steps.back().loss - plain.back()["loss"].get<double>()), 1e-4);
}

// The DoRA terms B = 0 hides at the start: with B and the magnitudes set to peft's random values
// (lf_dora/forward.safetensors), lf-train's eval forward gives peft's logits.
TEST(TrainParity, DoraForwardIsPeftsWithTrainedValues) {
  const auto dir = fixtures() / "lf_dora";
  const auto s = read_json(dir / "expected.json")["settings"];
  auto m = model::load_causal_lm((fixtures() / "qwen2_tiny").string(), {});
  model::LoraConfig lc;
  lc.rank = s["lora_rank"];
  lc.alpha = s["lora_alpha"].get<double>();
  lc.use_dora = true;
  model::apply_lora(*m, lc);
  auto want = model::load_tensor_file(dir / "forward.safetensors");
  const auto input_ids = want.at("input_ids"), logits = want.at("logits");
  c10::NoGradGuard no_grad;
  for (const auto& p : model::lora_parameters(*m)) p.tensor->copy_(want.at(p.name));
  m->set_training(false);
  const double diff = (m->forward(input_ids) - logits).abs().max().item<double>();
  std::printf("DoRA forward: max |logits - peft's| %.3g\n", diff);
  EXPECT_LT(diff, 1e-5);
}

}  // namespace
}  // namespace lf::train

#include <c10/core/GradMode.h>

#include <barrier>
#include <thread>

namespace lf::train {
namespace {

// The data-parallel seam: two ranks (threads, each with its own model copy) with
// micro-batch 1 x accumulation 2 take the same global batches as one process with
// micro-batch 2, so they reproduce HF's reference too (DESIGN "Order" and "Loss").
TEST(TrainParity, TwoRanksThroughTheDataParallelHooksMatchHf) {
  const auto data = fixture_dataset();
  auto c = fixture_config("full");
  c.schedule.per_device_train_batch_size = 1;
  c.eval.eval_strategy = "steps";
  c.eval.eval_steps = 10;
  c.eval.per_device_eval_batch_size = 2;
  std::vector<EncodedExample> ev;
  for (size_t i = 0; i < 7; ++i) {
    auto ids = data.input_ids(i);
    auto lab = data.labels(i);
    ev.push_back({{ids.begin(), ids.end()}, {lab.begin(), lab.end()}});
  }
  const auto eval = TokenizedDataset::from_examples(ev);
  std::vector<std::unique_ptr<model::CausalLM>> models;
  std::vector<std::vector<at::Tensor>> params(2);
  for (int r = 0; r < 2; ++r) {
    models.push_back(model::load_causal_lm(c.model.model_name_or_path, {}));
    for (auto& p : models.back()->named_parameters()) params[r].push_back(*p.tensor);
  }
  std::barrier sync(2);
  double scalars[2] = {0, 0};
  std::vector<TrainSummary> sums(2);
  auto rank_main = [&](int r) {
    TrainerSetup s;
    s.plan = c;
    s.model = models[r].get();
    s.train = &data;
    s.eval = &eval;
    s.write_outputs = false;
    s.progress = false;
    auto sum_grads = [&, r] {
      sync.arrive_and_wait();
      if (r == 0) {
        c10::NoGradGuard g;
        for (size_t i = 0; i < params[0].size(); ++i) {
          auto a = params[0][i].grad(), b = params[1][i].grad();
          auto total = a.defined() && b.defined() ? a + b : a.defined() ? a.clone() : b.clone();
          params[0][i].mutable_grad() = total;
          params[1][i].mutable_grad() = total.clone();
        }
      }
      sync.arrive_and_wait();
    };
    auto sum_scalar = [&, r](double v) {
      scalars[r] = v;
      sync.arrive_and_wait();
      const double total = scalars[0] + scalars[1];
      sync.arrive_and_wait();
      return total;
    };
    parallel::StrategySetup ss;
    ss.model = models[r].get();
    ss.trainable = model::trainable_parameters(*models[r], false);
    ss.optim = c.optim;
    ThreadPairStrategy pair(r, parallel::make_single_strategy(ss), sum_grads, sum_scalar);
    s.strategy = &pair;
    Trainer t(std::move(s));
    sums[r] = t.train();
  };
  std::thread other(rank_main, 1);
  rank_main(0);
  other.join();
  const auto want = read_json(fixtures() / "expected.json")["full"];
  expect_steps_match(sums[0], want);
  expect_steps_match(sums[1], want);
  expect_weights_match(models[1]->named_parameters(), fixtures() / "full_final.safetensors");
  // Evaluation split over the ranks (batch k on rank k % 2) equals one process's.
  ASSERT_EQ(sums[0].evals.size(), 1u);
  TrainerSetup one;
  one.plan = c;
  one.model = models[0].get();
  one.train = &data;
  one.eval = &eval;
  one.write_outputs = false;
  one.progress = false;
  EXPECT_NEAR(Trainer(std::move(one)).evaluate(), sums[0].evals[0].eval_loss, 1e-6);
  EXPECT_EQ(sums[0].evals[0].eval_loss, sums[1].evals[0].eval_loss);
}

}  // namespace
}  // namespace lf::train
