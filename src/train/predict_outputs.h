#pragma once
// What rank 0 writes after a predict run (predict_outputs.cpp): generated_predictions.jsonl as LLaMA-Factory's
// save_predictions decodes it, and the predict_* metrics (ComputeSimilarity, HF's speed_metrics) into
// predict_results.json and all_results.json. Internal to lf_train.
#include <cstdint>
#include <filesystem>
#include <vector>

#include "lf/tokenizer/tokenizer.h"

namespace lf::train {

// One generated batch: its rows' prompt ids, label ids and generated ids (each row as long as the batch ran,
// finished rows padded with pad_id).
struct PredictBatch {
  std::vector<std::vector<int32_t>> prompts, labels, generated;
};

struct PredictWrite {
  std::filesystem::path output_dir;
  int32_t pad_id = 0;
  bool skip_special_tokens = true;
  // HF pads each batch's output (prompt + new tokens) to the model's generation_config max_length (20 unless
  // generation_config.json / config.json says otherwise) before the run's rows are concatenated.
  int64_t generation_max_length = 20;
  double runtime_s = 0;
  int64_t total_batch_size = 1;  // per_device_eval_batch_size x world (HF's num_steps)
};

// Writes the three files; `batches` in dataset order. Returns the metrics it wrote.
void write_predictions(const std::vector<PredictBatch>& batches, const Tokenizer& tokenizer, const PredictWrite& w);

}  // namespace lf::train
