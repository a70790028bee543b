// Pieces of the trainer: example order, the chunked lm_head loss, fp16 loss scaling
// inside the loop, NaN stop, and the files written to output_dir.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <torch/csrc/autograd/autograd.h>

#include <unistd.h>

#include <fstream>
#include <map>
#include <set>

#include "lf/common/remove_tree.h"
#include "lf/model/freeze.h"
#include "lf/model/loader.h"
#include "lf/model/lora.h"
#include "lf/model/loss.h"
#include "lf/model/tensor_io.h"
#include "lf/train/batch.h"
#include "lf/train/data_order.h"
#include "lf/train/lm_loss.h"
#include "lf/train/model_flops.h"
#include "lf/train/trainer.h"
#include "train_test_util.h"

namespace lf::train {
namespace {
namespace fs = std::filesystem;
using testing::fixture_config;
using testing::fixture_dataset;

TEST(DataOrder, PermutationIsTorchRandpermOfSeedPlusEpoch) {
  // torch.randperm(10, generator=torch.Generator().manual_seed(42)).tolist()
  const std::vector<int64_t> want = {2, 6, 1, 8, 4, 5, 0, 9, 3, 7};
  EXPECT_EQ(epoch_permutation(10, 42, 0), want);
  EXPECT_EQ(epoch_permutation(10, 41, 1), want);
  EXPECT_NE(epoch_permutation(10, 42, 1), want);
}

TEST(DataOrder, StepContentDoesNotDependOnWorldSize) {
  const auto perm = epoch_permutation(37, 3, 0);
  for (int64_t step = 0; step < 3; ++step) {
    std::multiset<int64_t> one, two;
    for (const auto& mb : rank_micro_batches(perm, step, {2, 3, 1}, 0)) one.insert(mb.begin(), mb.end());
    for (int64_t r = 0; r < 2; ++r)
      for (const auto& mb : rank_micro_batches(perm, step, {1, 3, 2}, r)) two.insert(mb.begin(), mb.end());
    EXPECT_EQ(one, two) << "step " << step;
  }
  EXPECT_EQ(steps_per_epoch(37, {2, 3, 1}), 7);
  // The last, short step: 37 - 36 = 1 example, one micro-batch.
  const auto last = rank_micro_batches(perm, 6, {2, 3, 1}, 0);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].size(), 1u);
}

TEST(Batch, RightPaddedToMultipleOfEight) {
  const auto data = fixture_dataset();
  const auto b = collate(data, {0, 1}, 5);
  EXPECT_EQ(b.input_ids.size(1) % 8, 0);
  const auto n0 = static_cast<int64_t>(data.input_ids(0).size());
  if (n0 < b.input_ids.size(1)) {
    EXPECT_EQ(b.input_ids[0][n0].item<int64_t>(), 5);
    EXPECT_EQ(b.labels[0][n0].item<int64_t>(), -100);
  }
  EXPECT_EQ(b.num_targets, num_targets(data, 0) + num_targets(data, 1));
}

// The training loss's denominator is HF's num_items_in_batch: labels != -100 before the
// shift. With train_on_prompt the first label is real and counts, though never predicted.
TEST(Batch, HfNumItemsCountsLabelsBeforeTheShift) {
  const auto data = TokenizedDataset::from_examples({{{1, 2, 3, 4}, {1, 2, 3, 4}},          // train_on_prompt
                                                     {{1, 2, 3, 4}, {-100, -100, 3, 4}}});  // prompt masked
  EXPECT_EQ(num_targets(data, 0), 3);
  EXPECT_EQ(hf_num_items(data, 0), 4);
  EXPECT_EQ(num_targets(data, 1), 2);
  EXPECT_EQ(hf_num_items(data, 1), 2);
}

// Hidden states [3,9,16], a head [50,16] and labels with row 0's first 4 positions ignored.
struct HeadCase {
  at::Tensor h0, w0, labels;
};
HeadCase random_head_case(uint64_t seed) {
  at::manual_seed(seed);
  const int64_t b = 3, t = 9, c = 16, v = 50;
  HeadCase k{at::randn({b, t, c}, at::kDouble), at::randn({v, c}, at::kDouble) * 0.3,
             at::randint(0, v, {b, t}, at::kLong)};
  k.labels.index_put_({0, at::indexing::Slice(0, 4)}, -100);
  return k;
}
at::Tensor leaf(const at::Tensor& t) { return t.clone().set_requires_grad(true); }

TEST(LmLoss, ChunkedEqualsFullLogitsLossAndGradients) {
  auto [h0, w0, labels] = random_head_case(0);
  labels.index_put_({2, at::indexing::Slice(6, at::indexing::None)}, -100);
  auto h1 = leaf(h0), w1 = leaf(w0);
  auto ref = model::causal_lm_loss(at::matmul(h1, w1.t()), labels, /*sum_reduction=*/true);
  torch::autograd::backward({ref * 0.5});
  auto h2 = leaf(h0), w2 = leaf(w0);
  auto got = lm_head_loss_sum(h2, w2, labels, /*chunk_rows=*/4);
  torch::autograd::backward({got * 0.5});
  EXPECT_NEAR(got.item<double>(), ref.item<double>(), 1e-5);
  EXPECT_LT((h1.grad() - h2.grad()).abs().max().item<double>(), 1e-6);
  EXPECT_LT((w1.grad() - w2.grad()).abs().max().item<double>(), 1e-6);
  // A frozen weight gets no gradient, the hidden states still do.
  auto h3 = leaf(h0);
  auto got3 = lm_head_loss_sum(h3, w0, labels, 5);
  torch::autograd::backward({got3 * 0.5});
  EXPECT_LT((h1.grad() - h3.grad()).abs().max().item<double>(), 1e-6);
}

// The CUDA-graph loss (every row through the head, ignored ones masked) is the same sum with
// the same gradients as the target-rows loss, frozen weight included; a row of ignored labels
// only gets exact zeros.
TEST(LmLoss, AllRowsMaskedEqualsTargetRows) {
  auto [h0, w0, labels] = random_head_case(1);
  labels.index_put_({1, at::indexing::Slice()}, -100);  // a row without targets
  auto h1 = leaf(h0), w1 = leaf(w0);
  auto ref = lm_head_loss_sum(h1, w1, labels, /*chunk_rows=*/4);
  torch::autograd::backward({ref * 0.5});
  auto h2 = leaf(h0), w2 = leaf(w0);
  auto got = lm_head_loss_sum_all_rows(h2, w2, labels, /*chunk_rows=*/5);
  torch::autograd::backward({got * 0.5});
  EXPECT_NEAR(got.item<double>(), ref.item<double>(), 1e-9);
  // Gradients accumulate in fp32 buffers (the head's): the chunks' sums differ by fp32 roundings.
  EXPECT_LT((h1.grad() - h2.grad()).abs().max().item<double>(), 1e-6);
  EXPECT_LT((w1.grad() - w2.grad()).abs().max().item<double>(), 1e-6);
  EXPECT_EQ(h2.grad()[1].abs().max().item<double>(), 0.0);
  auto h3 = leaf(h0);
  torch::autograd::backward({lm_head_loss_sum_all_rows(h3, w0, labels, 7) * 0.5});
  EXPECT_LT((h1.grad() - h3.grad()).abs().max().item<double>(), 1e-6);
}

TrainerSetup setup_for(const config::JobPlan& c, model::CausalLM& m, const TokenizedDataset& data) {
  TrainerSetup s;
  s.plan = c;
  s.model = &m;
  s.train = &data;
  s.write_outputs = false;
  s.progress = false;
  return s;
}

TEST(Fp16, OverflowStepIsSkippedAndScaleLowered) {
  const auto data = fixture_dataset();
  auto c = fixture_config("full");
  c.precision.fp16 = true;
  c.schedule.max_steps = 40;
  auto m = model::load_causal_lm(c.model.model_name_or_path, {});
  m->set_compute_dtype(at::kHalf);
  const auto before = m->named_parameters()[1].tensor->clone();
  auto s = setup_for(c, *m, data);
  s.loss_scaler.init_scale = std::ldexp(1.0, 40);  // the first steps' fp16 grads overflow
  Trainer t(std::move(s));
  const auto sum = t.train();
  ASSERT_TRUE(sum.steps[0].skipped);
  EXPECT_EQ(sum.steps[0].loss_scale, std::ldexp(1.0, 40));
  EXPECT_EQ(sum.steps[1].loss_scale, std::ldexp(1.0, 39));
  EXPECT_TRUE(std::isfinite(sum.steps[0].loss));
  size_t first_taken = 0;
  while (first_taken < sum.steps.size() && sum.steps[first_taken].skipped) ++first_taken;
  ASSERT_LT(first_taken, sum.steps.size()) << "no step was ever taken";
  EXPECT_GT(first_taken, 0u);
  // Skipped steps do not advance the lr schedule: the first real step uses step 0's lr (0 in warmup).
  EXPECT_EQ(sum.steps[first_taken].lr, 0.0);
  if (first_taken + 1 < sum.steps.size() && !sum.steps[first_taken + 1].skipped) {
    EXPECT_FALSE(at::equal(before, *m->named_parameters()[1].tensor));
  }
}

TEST(Trainer, NanLossStopsWithTheStepNumber) {
  const auto data = fixture_dataset();
  auto c = fixture_config("full");
  auto m = model::load_causal_lm(c.model.model_name_or_path, {});
  {
    c10::NoGradGuard g;
    m->named_parameters()[3].tensor->fill_(std::nan(""));
  }
  Trainer t(setup_for(c, *m, data));
  try {
    t.train();
    FAIL() << "expected NonFiniteLossError";
  } catch (const NonFiniteLossError& e) {
    EXPECT_NE(std::string(e.what()).find("at step 1 of 10"), std::string::npos) << e.what();
    EXPECT_EQ(e.exit_code(), kExitConfig);
  }
}

// LF_LATE_READBACK changes when a step's numbers reach the host, not what they are: the same run read at each
// step's end and read one step late gives the same records bit for bit; read late, every step the loop does
// not act on (an epoch's end, the last) came back after the next step was launched.
TEST(Trainer, LateReadbackChangesWhenNotWhat) {
  const auto data = fixture_dataset();
  std::vector<TrainSummary> runs;
  for (const bool late : {false, true}) {
    auto c = fixture_config("full");
    c.logging.late_readback = late;
    auto m = model::load_causal_lm(c.model.model_name_or_path, {});
    Trainer t(setup_for(c, *m, data));
    runs.push_back(t.train());
  }
  const auto& each = runs[0];
  const auto& late = runs[1];
  ASSERT_EQ(each.steps.size(), late.steps.size());
  EXPECT_EQ(each.late_reads, 0);
  EXPECT_GE(late.late_reads, static_cast<int64_t>(late.steps.size()) / 2);
  EXPECT_LT(late.late_reads, static_cast<int64_t>(late.steps.size()));  // the last step is read at once
  for (size_t i = 0; i < each.steps.size(); ++i) {
    const auto &a = each.steps[i], &b = late.steps[i];
    EXPECT_EQ(a.step, b.step);
    EXPECT_EQ(a.loss, b.loss) << "step " << a.step;
    EXPECT_EQ(a.grad_norm, b.grad_norm) << "step " << a.step;
    EXPECT_EQ(a.lr, b.lr);
    EXPECT_EQ(a.epoch, b.epoch);
    EXPECT_EQ(a.step_tokens, b.step_tokens);
  }
  EXPECT_EQ(each.train_loss, late.train_loss);
}

TEST(Trainer, EmptyDatasetIsAConfigError) {
  const TokenizedDataset empty;
  auto c = fixture_config("full");
  auto m = model::load_causal_lm(c.model.model_name_or_path, {});
  EXPECT_THROW(Trainer(setup_for(c, *m, empty)), ConfigError);
}

std::vector<nlohmann::json> read_lines(const fs::path& p) {
  std::vector<nlohmann::json> out;
  std::ifstream in(p);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// The first n examples of `data`, as an evaluation set.
TokenizedDataset first_examples(const TokenizedDataset& data, size_t n) {
  std::vector<EncodedExample> ev;
  for (size_t i = 0; i < n; ++i) {
    auto ids = data.input_ids(i);
    auto lab = data.labels(i);
    ev.push_back({{ids.begin(), ids.end()}, {lab.begin(), lab.end()}});
  }
  return TokenizedDataset::from_examples(ev);
}

// HF evaluates when training stops between two evaluations too: steps 4, 8 and the last
// (10) with eval_steps 4; an epoch strategy cut short by max_steps evaluates at the last step.
// eval_loss is LLaMA-Factory's: the mean of the batches' means (a short last batch, 5
// examples in batches of 2, counts as a full one).
TEST(Trainer, EvaluatesAtTheLastStepAndAveragesBatchMeansLikeLlamaFactory) {
  const auto data = fixture_dataset();
  const auto eval = first_examples(data, 5);
  struct Run {
    std::vector<int64_t> eval_steps;
    double last_eval = 0, mean_of_batch_means = 0, mean_over_examples = 0;
  };
  auto run = [&](const std::string& strategy, int64_t max_steps) {
    auto c = fixture_config("full");
    c.schedule.max_steps = max_steps;
    c.eval.eval_strategy = strategy;
    c.eval.eval_steps = 4;
    c.eval.per_device_eval_batch_size = 2;
    auto m = model::load_causal_lm(c.model.model_name_or_path, {});
    auto s = setup_for(c, *m, data);
    s.eval = &eval;
    Run r;
    for (const auto& e : Trainer(std::move(s)).train().evals) {
      r.eval_steps.push_back(e.step);
      r.last_eval = e.eval_loss;
    }
    // The last evaluation saw the final weights: its batches' mean losses, by hand.
    c10::NoGradGuard no_grad;
    m->set_training(false);
    for (const std::vector<int64_t>& idx : {std::vector<int64_t>{0, 1}, {2, 3}, {4}}) {
      const auto b = collate(eval, idx, 0);
      const auto logits = m->forward(b.input_ids).to(at::kDouble);
      const auto y = b.labels.narrow(1, 1, b.labels.size(1) - 1);
      const auto nll = -at::log_softmax(logits.narrow(1, 0, logits.size(1) - 1), -1)
                            .gather(-1, y.clamp_min(0).unsqueeze(-1))
                            .squeeze(-1);
      const auto mask = y.ne(-100);
      const double mean = (nll * mask).sum().item<double>() / mask.sum().item<double>();
      r.mean_of_batch_means += mean / 3;
      r.mean_over_examples += mean * static_cast<double>(idx.size()) / 5;
    }
    return r;
  };
  const auto by_steps = run("steps", 10);
  EXPECT_EQ(by_steps.eval_steps, (std::vector<int64_t>{4, 8, 10}));
  EXPECT_NEAR(by_steps.last_eval, by_steps.mean_of_batch_means, 1e-5);
  EXPECT_GT(std::abs(by_steps.mean_of_batch_means - by_steps.mean_over_examples), 1e-4) << "the test must tell them apart";
  EXPECT_EQ(run("epoch", 3).eval_steps, (std::vector<int64_t>{3}));
}

// total_flos as HF counts it: 6 x padded tokens x num_parameters(exclude_embeddings=True),
// which leaves out the nn.Embedding only, so an untied lm_head (this fixture's) counts.
TEST(Trainer, TotalFlosCountsAnUntiedLmHead) {
  const auto data = fixture_dataset();
  const fs::path out = fs::temp_directory_path() / ("lf_train_flos_" + std::to_string(::getpid()));
  lf::remove_tree(out);
  auto c = fixture_config("full");
  c.output.output_dir = out.string();
  c.schedule.max_steps = 2;
  auto m = model::load_causal_lm(c.model.model_name_or_path, {});
  ASSERT_FALSE(m->config().tie_word_embeddings);
  int64_t params = 0;
  for (auto& p : m->named_parameters()) params += p.name == "model.embed_tokens.weight" ? 0 : p.tensor->numel();
  auto s = setup_for(c, *m, data);
  s.write_outputs = true;
  const auto sum = Trainer(std::move(s)).train();
  int64_t padded = 0;
  for (const auto& st : sum.steps) padded += st.padded_tokens;
  std::ifstream in(out / "all_results.json");
  const auto results = nlohmann::json::parse(in);
  EXPECT_DOUBLE_EQ(results["total_flos"].get<double>(), 6.0 * static_cast<double>(padded) * static_cast<double>(params));
  lf::remove_tree(out);
}

// lf_train_mfu's numerator: PaLM's 6N (full) / 4N + 2 x trainable (LoRA) + 12·L·H·T per token,
// N every parameter the forward multiplies by (the adapters' A/B included).
TEST(ModelFlops, SixNFullFourNPlusTrainableLora) {
  auto c = fixture_config("full");
  auto m = model::load_causal_lm(c.model.model_name_or_path, {});
  double n = 0;
  for (auto& p : m->named_parameters()) n += static_cast<double>(p.tensor->numel());
  const auto full = model_flops(*m, static_cast<int64_t>(n));
  EXPECT_DOUBLE_EQ(full.dense_per_token, 6.0 * n);
  EXPECT_DOUBLE_EQ(full.attention_per_token_position,
                   12.0 * static_cast<double>(m->config().num_layers * m->config().hidden_size));
  model::LoraConfig lc;
  lc.rank = 4;
  lc.target = {"q_proj", "v_proj"};
  model::apply_lora(*m, lc);
  double ab = 0;
  for (auto& p : model::lora_parameters(*m)) ab += static_cast<double>(p.tensor->numel());
  ASSERT_GT(ab, 0);
  const auto lora = model_flops(*m, static_cast<int64_t>(ab));
  EXPECT_DOUBLE_EQ(lora.dense_per_token, 4.0 * (n + ab) + 2.0 * ab);
  EXPECT_DOUBLE_EQ(step_model_flops(lora, 100, 3000), lora.dense_per_token * 100 + lora.attention_per_token_position * 3000);
}

// finetuning_type freeze: the parameters LLaMA-Factory's _setup_freeze_tuning trains
// (scripts/fixtures/lf_freeze_reference.py), for each case; then a run moves those only, and the saved
// model holds every parameter (the frozen ones as loaded).
TEST(Freeze, TrainsWhatLlamaFactoryTrains) {
  const auto cases = testing::read_json(testing::fixtures() / "lf_freeze.json");
  ASSERT_GE(cases.size(), 4u);
  auto list = [](const nlohmann::json& cfg, const char* key, std::vector<std::string> fallback) {
    return cfg.contains(key) ? model::parse_lora_target(cfg[key].get<std::string>()) : fallback;
  };
  for (const auto& [name, cs] : cases.items()) {
    SCOPED_TRACE(name);
    auto m = model::load_causal_lm((testing::fixtures() / "qwen2_tiny").string(), {});
    model::FreezeConfig fc;
    fc.trainable_layers = cs["config"].value("freeze_trainable_layers", int64_t{2});
    fc.trainable_modules = list(cs["config"], "freeze_trainable_modules", {"all"});
    fc.extra_modules = list(cs["config"], "freeze_extra_modules", {});
    std::vector<std::string> got;
    for (const auto& p : model::apply_freeze(*m, fc)) got.push_back(p.name);
    // The same set: HF lists a layer's norms after its mlp (module order), lf-train in file order.
    auto want = cs["trainable"].get<std::vector<std::string>>();
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    EXPECT_EQ(got, want);
  }
  model::FreezeConfig bad;
  bad.trainable_modules = {"attn"};
  auto m = model::load_causal_lm((testing::fixtures() / "qwen2_tiny").string(), {});
  try {
    model::apply_freeze(*m, bad);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("module 'attn' is not found; choose from input_layernorm, mlp"), std::string::npos)
        << e.what();
  }
}

TEST(Freeze, ARunMovesOnlyTheTrainablePartAndSavesTheWholeModel) {
  const auto data = fixture_dataset();
  const fs::path out = fs::temp_directory_path() / ("lf_train_freeze_" + std::to_string(::getpid()));
  lf::remove_tree(out);
  auto c = fixture_config("full");
  c.adapter.finetuning_type = "freeze";
  c.schedule.max_steps = 3;
  c.output.output_dir = out.string();
  auto m = model::load_causal_lm(c.model.model_name_or_path, {});
  model::FreezeConfig fc;
  fc.trainable_layers = 1;
  fc.extra_modules = {"norm"};
  const auto trainable = model::apply_freeze(*m, fc);
  std::map<std::string, at::Tensor> before;
  for (auto& p : m->named_parameters()) before[p.name] = p.tensor->detach().clone();
  auto s = setup_for(c, *m, data);
  s.write_outputs = true;
  Trainer(std::move(s)).train();
  std::set<std::string> train_names;
  for (const auto& p : trainable) train_names.insert(p.name);
  EXPECT_TRUE(train_names.count("model.layers.1.self_attn.q_proj.weight"));
  EXPECT_TRUE(train_names.count("model.layers.0.input_layernorm.weight"));  // "norm": every norm
  const auto saved = model::load_tensor_file(out / "model.safetensors");
  for (auto& p : m->named_parameters()) {
    SCOPED_TRACE(p.name);
    EXPECT_EQ(at::equal(*p.tensor, before[p.name]), !train_names.count(p.name));
    ASSERT_TRUE(saved.count(p.name));
    EXPECT_TRUE(at::equal(saved.at(p.name), *p.tensor));
  }
  lf::remove_tree(out);
}

TEST(Trainer, OutputsAsHfAndLlamaFactory) {
  const auto data = fixture_dataset();
  const auto eval = first_examples(data, 5);
  const fs::path out = fs::temp_directory_path() / ("lf_train_outputs_" + std::to_string(::getpid()));
  lf::remove_tree(out);
  // A leftover of an older, longer run: rotated out first (the oldest written), never a new one.
  fs::create_directories(out / "checkpoint-900");
  fs::last_write_time(out / "checkpoint-900", fs::file_time_type::clock::now() - std::chrono::hours(24));
  auto c = fixture_config("full");
  c.output.output_dir = out.string();
  c.logging.logging_steps = 2;
  c.eval.eval_strategy = "steps";
  c.eval.eval_steps = 5;
  c.eval.per_device_eval_batch_size = 2;
  c.output.save_steps = 4;
  c.output.save_total_limit = 2;
  c.output.plot_loss = true;
  auto m = model::load_causal_lm(c.model.model_name_or_path, {});
  auto s = setup_for(c, *m, data);
  s.write_outputs = true;
  s.eval = &eval;
  s.model_dir = c.model.model_name_or_path;
  Trainer t(std::move(s));
  const auto sum = t.train();
  ASSERT_EQ(sum.evals.size(), 2u);

  const auto lines = read_lines(out / "trainer_log.jsonl");
  ASSERT_GE(lines.size(), 5u + 2u);
  const auto& first = lines[0];
  for (const char* k : {"current_steps", "total_steps", "loss", "lr", "epoch", "percentage", "elapsed_time",
                        "remaining_time", "throughput"})
    EXPECT_TRUE(first.contains(k)) << k;
  EXPECT_EQ(first["current_steps"], 2);
  EXPECT_EQ(first["total_steps"], 10);
  EXPECT_DOUBLE_EQ(first["loss"].get<double>(), (sum.steps[0].loss + sum.steps[1].loss) / 2);
  int evals = 0;
  for (const auto& l : lines) evals += l.contains("eval_loss");
  // eval_steps 5 and 10; the final evaluation is no line of it (LLaMA-Factory's log ends with training).
  EXPECT_EQ(evals, 2);
  const auto& last = lines.back();  // the end-of-training line: no loss, no eval_loss
  EXPECT_EQ(last["current_steps"], 10);
  EXPECT_FALSE(last.contains("loss") || last.contains("eval_loss")) << last.dump();

  const auto state = testing::read_json(out / "trainer_state.json");
  EXPECT_EQ(state["global_step"], 10);
  EXPECT_EQ(state["max_steps"], 10);
  // HF with max_steps: the epochs 10 steps reach, not the config's num_train_epochs.
  const int64_t spe = steps_per_epoch(static_cast<int64_t>(data.size()), {c.schedule.per_device_train_batch_size,
                                                                         c.schedule.gradient_accumulation_steps, 1});
  EXPECT_EQ(state["num_train_epochs"], (10 + spe - 1) / spe);
  EXPECT_TRUE(state["log_history"].back().contains("train_loss"));
  const auto all = testing::read_json(out / "all_results.json");
  for (const char* k : {"epoch", "train_loss", "train_runtime", "train_samples_per_second", "eval_loss"})
    EXPECT_TRUE(all.contains(k)) << k;
  EXPECT_NEAR(all["train_loss"].get<double>(), sum.train_loss, 1e-12);
  EXPECT_TRUE(fs::exists(out / "train_results.json"));
  EXPECT_TRUE(fs::exists(out / "training_loss.png"));
  EXPECT_TRUE(fs::exists(out / "training_eval_loss.png"));
  EXPECT_TRUE(fs::exists(out / "model.safetensors"));
  EXPECT_TRUE(fs::exists(out / "config.json"));
  // save_steps 4 + the final save, save_total_limit 2: checkpoint-8 and checkpoint-10 remain.
  EXPECT_FALSE(fs::exists(out / "checkpoint-900"));
  EXPECT_FALSE(fs::exists(out / "checkpoint-4"));
  EXPECT_TRUE(fs::exists(out / "checkpoint-8" / "model.safetensors"));
  EXPECT_TRUE(fs::exists(out / "checkpoint-10" / "trainer_state.json"));
  EXPECT_TRUE(fs::exists(out / "checkpoint-10" / "optimizer.safetensors"));
  // The saved model is the trained one.
  auto reloaded = model::load_causal_lm(out.string(), {});
  EXPECT_TRUE(at::equal(*reloaded->named_parameters()[2].tensor, *m->named_parameters()[2].tensor));
  lf::remove_tree(out);
}

}  // namespace
}  // namespace lf::train

namespace lf::train {
namespace {

// bf16 paths (CPU): full = fp32 master weights with bf16 activations; LoRA = a bf16
// frozen base with fp32 adapters. The loss stays close to the fp32 reference and the
// master/adapter weights stay fp32.
TEST(MixedPrecision, Bf16FullAndLoraTrackFp32) {
  const auto data = fixture_dataset();
  const auto want = testing::read_json(testing::fixtures() / "expected.json");
  for (const std::string kind : {"full", "lora"}) {
    SCOPED_TRACE(kind);
    auto c = fixture_config(kind);
    c.precision.bf16 = true;
    c.schedule.max_steps = 10;
    model::LoadOptions lo;
    if (kind == "lora") lo.param_dtype = at::kBFloat16;
    auto m = model::load_causal_lm(c.model.model_name_or_path, lo);
    m->set_compute_dtype(at::kBFloat16);
    auto s = setup_for(c, *m, data);
    if (kind == "lora") s.lora = model::load_lora_adapter(*m, testing::fixtures() / "lora_init");
    s.plan.model.gradient_checkpointing = true;
    Trainer t(std::move(s));
    const auto sum = t.train();
    for (size_t i = 0; i < sum.steps.size(); ++i)
      EXPECT_NEAR(sum.steps[i].loss, want[kind][i]["loss"].get<double>(), 0.03) << "step " << i + 1;
    if (kind == "full") {
      EXPECT_EQ(m->named_parameters()[0].tensor->scalar_type(), at::kFloat);
    } else {
      EXPECT_EQ(model::lora_parameters(*m)[0].tensor->scalar_type(), at::kFloat);
      EXPECT_EQ(m->named_parameters()[0].tensor->scalar_type(), at::kBFloat16);
    }
  }
}

}  // namespace
}  // namespace lf::train

namespace lf::train {
namespace {

// LoRA dropout draws the same masks whether the layers are checkpointed or not
// (the recomputation replays the RNG), so the runs agree step for step.
TEST(Checkpointing, LoraDropoutSameWithAndWithoutCheckpointing) {
  const auto data = fixture_dataset();
  std::vector<double> losses[2];
  at::Tensor a_final[2];
  for (int ckpt = 0; ckpt < 2; ++ckpt) {
    auto c = fixture_config("lora");
    c.schedule.max_steps = 4;
    c.model.gradient_checkpointing = ckpt == 1;
    auto m = model::load_causal_lm(c.model.model_name_or_path, {});
    auto lc = model::load_lora_adapter(*m, testing::fixtures() / "lora_init");
    for (auto& layer : m->layers())
      for (auto& [name, lin] : layer.linears())
        if (lin->lora_) lin->lora_->dropout_ = 0.2;
    lc.dropout = 0.2;
    at::manual_seed(123);
    auto s = setup_for(c, *m, data);
    s.lora = lc;
    Trainer t(std::move(s));
    for (const auto& r : t.train().steps) losses[ckpt].push_back(r.loss);
    a_final[ckpt] = model::lora_parameters(*m)[0].tensor->detach().clone();
  }
  ASSERT_EQ(losses[0].size(), losses[1].size());
  for (size_t i = 0; i < losses[0].size(); ++i) EXPECT_NEAR(losses[0][i], losses[1][i], 1e-6) << "step " << i + 1;
  EXPECT_LT((a_final[0] - a_final[1]).abs().max().item<double>(), 1e-6);
  // Dropout did act: the later steps differ from the no-dropout reference.
  const auto ref = testing::read_json(testing::fixtures() / "expected.json")["lora"];
  EXPECT_GT(std::fabs(losses[0][3] - ref[3]["loss"].get<double>()), 1e-5);
}

}  // namespace
}  // namespace lf::train

namespace lf::train {
namespace {

// A run resumed from checkpoint-4 (weights, AdamW moments, schedule, counters, RNG,
// example cursor) continues exactly as the uninterrupted run: full, and LoRA with
// dropout (the restored RNG draws the same masks).
TEST(Resume, ContinuesAsIfUninterrupted) {
  const auto data = fixture_dataset();
  const fs::path root = fs::temp_directory_path() / ("lf_train_resume_" + std::to_string(::getpid()));
  lf::remove_tree(root);
  for (const std::string kind : {"full", "lora"}) {
    SCOPED_TRACE(kind);
    auto run = [&](const fs::path& out, const fs::path& resume, uint64_t seed) {
      auto c = fixture_config(kind);
      c.output.output_dir = out.string();
      c.output.save_steps = 4;
      c.adapter.lora_dropout = 0.2;
      auto m = model::load_causal_lm(c.model.model_name_or_path, {});
      auto s = setup_for(c, *m, data);
      if (kind == "lora") {
        auto lc = model::load_lora_adapter(*m, testing::fixtures() / "lora_init");
        for (auto& layer : m->layers())
          for (auto& [name, lin] : layer.linears())
            if (lin->lora_) lin->lora_->dropout_ = 0.2;
        lc.dropout = 0.2;
        s.lora = lc;
      }
      s.write_outputs = true;
      s.resume_from = resume;
      at::manual_seed(seed);
      Trainer t(std::move(s));
      auto sum = t.train();
      std::vector<at::Tensor> w;
      for (auto& p : kind == "lora" ? model::lora_parameters(*m) : m->named_parameters())
        w.push_back(p.tensor->detach().clone());
      return std::make_pair(sum, w);
    };
    const auto [a, wa] = run(root / (kind + "_a"), {}, 5);
    ASSERT_TRUE(fs::exists(root / (kind + "_a") / "checkpoint-4" / "optimizer.safetensors"));
    const auto [b, wb] = run(root / (kind + "_b"), root / (kind + "_a") / "checkpoint-4", 999);
    ASSERT_EQ(b.steps.size(), 6u);
    for (size_t i = 0; i < b.steps.size(); ++i) {
      EXPECT_EQ(b.steps[i].step, a.steps[i + 4].step);
      EXPECT_NEAR(b.steps[i].loss, a.steps[i + 4].loss, 1e-7) << "step " << b.steps[i].step;
      EXPECT_DOUBLE_EQ(b.steps[i].lr, a.steps[i + 4].lr);
      EXPECT_NEAR(b.steps[i].epoch, a.steps[i + 4].epoch, 1e-12);
    }
    EXPECT_NEAR(b.train_loss, a.train_loss, 1e-7);
    ASSERT_EQ(wa.size(), wb.size());
    for (size_t i = 0; i < wa.size(); ++i) EXPECT_LT((wa[i] - wb[i]).abs().max().item<double>(), 1e-7) << i;
  }
  lf::remove_tree(root);
}

}  // namespace
}  // namespace lf::train
