// neat_packing (issue 15): packed rows with per-sequence positions and a block-diagonal causal
// mask train exactly as the same sequences unpacked (CPU, fp32: every step's loss and the final
// weights within 1e-5), with and without activation checkpointing; plain packing, whose
// sequences see each other (with the same per-sequence positions, as LLaMA-Factory's), does not.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "lf/data/supervised.h"
#include "lf/model/loader.h"
#include "lf/train/batch.h"
#include "lf/train/trainer.h"
#include "train_test_util.h"

namespace lf::train {
namespace {
using testing::fixture_config;
using testing::fixture_dataset;

std::vector<EncodedExample> examples_of(const TokenizedDataset& d) {
  std::vector<EncodedExample> out;
  for (size_t i = 0; i < d.size(); ++i) {
    const auto ids = d.input_ids(i), labels = d.labels(i);
    out.push_back({{ids.begin(), ids.end()}, {labels.begin(), labels.end()}});
  }
  return out;
}

struct Run {
  std::vector<double> losses;
  std::vector<at::Tensor> weights;
};

// Three optimizer steps, each over the whole dataset (one micro-batch of every row), so
// that the packed and the unpacked run see the same sequences in every step.
Run train(const TokenizedDataset& data, bool checkpointing) {
  auto c = fixture_config("full");
  c.schedule.per_device_train_batch_size = static_cast<int64_t>(data.size());
  c.schedule.gradient_accumulation_steps = 1;
  c.schedule.max_steps = 3;
  c.schedule.warmup_steps = 0;
  c.model.gradient_checkpointing = checkpointing;
  auto m = model::load_causal_lm(c.model.model_name_or_path, {});
  TrainerSetup s;
  s.plan = c;
  s.model = m.get();
  s.train = &data;
  s.write_outputs = false;
  s.progress = false;
  Run r;
  for (const auto& step : Trainer(std::move(s)).train().steps) r.losses.push_back(step.loss);
  for (auto& p : m->named_parameters()) r.weights.push_back(p.tensor->detach().clone());
  return r;
}

double max_rel_weight_diff(const Run& a, const Run& b) {
  double worst = 0;
  for (size_t i = 0; i < a.weights.size(); ++i)
    worst = std::max(worst, ((a.weights[i] - b.weights[i]).norm() / b.weights[i].norm()).item<double>());
  return worst;
}

TEST(NeatPacking, TrainsAsTheSequencesUnpacked) {
  const auto unpacked = fixture_dataset();
  const auto examples = examples_of(unpacked);
  int64_t longest = 0;
  for (const auto& e : examples) longest = std::max<int64_t>(longest, static_cast<int64_t>(e.input_ids.size()));
  const int64_t cutoff = 3 * longest;  // several sequences per pack; none dropped
  const auto neat = TokenizedDataset::from_examples(pack_examples(examples, cutoff, 0), /*neat=*/true);
  const auto plain = TokenizedDataset::from_examples(pack_examples(examples, cutoff, 0));
  ASSERT_TRUE(neat.has_segments() && neat.neat());
  ASSERT_TRUE(plain.has_segments() && !plain.neat());
  ASSERT_LT(neat.size(), examples.size() / 2) << "the test needs packs of several sequences";

  // The batch the trainer builds: positions restart with each sequence, padding is segment 0.
  const auto b = collate(neat, {0}, 0);
  ASSERT_TRUE(b.segment_ids.defined() && b.position_ids.defined());
  const auto seg = neat.segment_ids(0);
  for (size_t j = 1; j < seg.size(); ++j) {
    if (seg[j] != 0 && seg[j] != seg[j - 1]) {
      EXPECT_EQ(b.position_ids[0][static_cast<int64_t>(j)].item<int64_t>(), 0);
    }
  }
  // Plain packing: the same positions (LLaMA-Factory's packed position_ids), no mask across the sequences.
  const auto pb = collate(plain, {0}, 0);
  EXPECT_FALSE(pb.segment_ids.defined());
  ASSERT_TRUE(pb.position_ids.defined());
  EXPECT_TRUE(pb.position_ids.equal(b.position_ids));

  for (bool checkpointing : {false, true}) {
    SCOPED_TRACE(checkpointing ? "with activation checkpointing" : "without");
    const auto ref = train(unpacked, checkpointing), out = train(neat, checkpointing);
    ASSERT_EQ(out.losses.size(), 3u);
    for (size_t i = 0; i < ref.losses.size(); ++i)
      EXPECT_NEAR(out.losses[i], ref.losses[i], 1e-5 * std::abs(ref.losses[i])) << "step " << i + 1;
    EXPECT_LT(max_rel_weight_diff(out, ref), 1e-5);
  }
  // Plain packing lets the sequences see each other: not equal.
  const auto ref = train(unpacked, false), mixed = train(plain, false);
  EXPECT_GT(std::abs(mixed.losses[0] - ref.losses[0]), 1e-4) << "the test must tell packing from neat packing";
}

}  // namespace
}  // namespace lf::train
