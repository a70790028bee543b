#pragma once
// What a job will run, resolved from its plan (`lf-train plan CONFIG`, and the same at the top of
// every training run): the model and what trains, the world and the global batch, the strategy
// with its units, buckets, prefetch and offload, the precision, the kernel and graph paths, and
// the memory model's bytes per rank by kind. One JSON object (`lf-train plan --json`); the text
// is printed from it, so both always say the same. Torch-free.
#include <nlohmann/json.hpp>

#include <string>

#include "lf/config/job_plan.h"
#include "lf/model/config.h"
#include "lf/plan/memory_model.h"

namespace lf::plan {

// Whether the micro-step runs as a CUDA graph on a GPU (train/step_graph.h), and if not why
// ("" when it does): one process without gradient routes, no LoRA dropout, no neat_packing.
std::string cuda_graphs_refusal(const config::JobPlan& plan, const WorldLayout& world);

// model_path: where config.json was read (for the summary's model line).
nlohmann::json plan_summary(const config::JobPlan& plan, const model::ModelConfig& mc, const WorldLayout& world);

// The summary as aligned `name  value` lines; a "data" member (added by `lf-train plan`) included.
std::string plan_summary_text(const nlohmann::json& summary);

}  // namespace lf::plan
