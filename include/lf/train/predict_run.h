#pragma once
// LLaMA-Factory 0.9.5's predict run (sft with do_predict + predict_with_generate, do_train false): the model
// (and its adapters, merged as LLaMA-Factory merges them when not training) generates for every eval_dataset
// example, prompts batched per_device_eval_batch_size at a time and left-padded as its trainer batches them;
// rank r of W generates batches r, r+W, ... (accelerate's eval sharding), and rank 0 gathers them in dataset
// order and writes output_dir/generated_predictions.jsonl (CustomSeq2SeqTrainer.save_predictions),
// predict_results.json and all_results.json (ComputeSimilarity's BLEU-4 / ROUGE, HF's speed metrics).
// Sampling draws from a generator seeded with (seed, batch index), so W ranks write what one writes.
#include "lf/config/train_config.h"

namespace lf::train {

// Runs it on this worker; every rank calls it. Throws the typed errors (lf::Error).
void predict_from_config(const config::LoadedConfig& loaded);

}  // namespace lf::train
