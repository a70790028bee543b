#pragma once
// Shared helpers of the trainer tests: the HF reference fixtures (scripts/fixtures/
// train_hf_reference.py) as C++ objects.
#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "lf/config/train_config.h"
#include "lf/data/tokenized_dataset.h"

namespace lf::train::testing {

inline std::filesystem::path fixtures() { return LF_TRAIN_FIXTURES; }

inline nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

inline TokenizedDataset fixture_dataset() {
  std::vector<EncodedExample> ex;
  for (const auto& e : read_json(fixtures() / "data.json"))
    ex.push_back({e["input_ids"].get<std::vector<int32_t>>(), e["labels"].get<std::vector<int32_t>>()});
  return TokenizedDataset::from_examples(ex);
}

// The JobPlan of the reference runs ("full" or "lora").
inline config::JobPlan fixture_config(const std::string& kind) {
  const auto s = read_json(fixtures() / "expected.json")["settings"];
  config::JobPlan c;
  c.schedule.per_device_train_batch_size = s["per_device_train_batch_size"];
  c.schedule.gradient_accumulation_steps = s["gradient_accumulation_steps"];
  c.schedule.max_steps = s["max_steps"];
  c.schedule.warmup_steps = s["warmup_steps"].get<double>();
  c.schedule.lr_scheduler_type = s["lr_scheduler_type"];
  c.optim.weight_decay = s["weight_decay"];
  c.optim.adam_beta1 = s["adam_beta1"];
  c.optim.adam_beta2 = s["adam_beta2"];
  c.optim.adam_epsilon = s["adam_epsilon"];
  c.seed = s["seed"];
  c.optim.learning_rate = s[kind]["learning_rate"];
  c.optim.max_grad_norm = s[kind]["max_grad_norm"];
  c.model.gradient_checkpointing = false;
  c.logging.logging_steps = 1;
  c.adapter.finetuning_type = kind;
  c.model.model_name_or_path = (fixtures() / "qwen2_tiny").string();
  return c;
}

}  // namespace lf::train::testing
