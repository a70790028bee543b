// `lf-train plan`'s summary (plan_summary.h): built as one JSON object, printed as text from it.
#include "lf/plan/plan_summary.h"

#include <fmt/format.h>
#include <fmt/ranges.h>


#include "lf/config/expert_parallel.h"
#include "lf/model/model_layout.h"
#include "lf/plan/model_units.h"
#include "lf/quant/fp8_recipe.h"

namespace lf::plan {
namespace {

using nlohmann::json;

std::string dtype_name(const config::PrecisionSection& p) { return p.bf16 ? "bf16" : p.fp16 ? "fp16" : "fp32"; }

std::string strategy_name(const config::ParallelSection& p, int64_t world) {
  if (p.sharded()) return fmt::format("ZeRO-{}", p.zero_stage);
  return world > 1 ? "data parallel (DDP)" : "one process";
}

// Consecutive units of the same sizes in one entry ("layers 0-27", count 28).
json units_json(const std::vector<UnitParams>& units) {
  json out = json::array();
  for (size_t u = 0; u < units.size();) {
    size_t end = u + 1;
    while (end < units.size() && units[end].params == units[u].params && units[end].trainable == units[u].trainable &&
           units[u].name.rfind("layer ", 0) == 0 && units[end].name.rfind("layer ", 0) == 0)
      ++end;
    const std::string name = end - u == 1 ? units[u].name
                                          : fmt::format("layers {}-{}", units[u].name.substr(6), units[end - 1].name.substr(6));
    out.push_back({{"name", name}, {"count", end - u}, {"params", units[u].params},
                   {"trainable", units[u].trainable}, {"frozen", units[u].frozen}});
    u = end;
  }
  return out;
}

json adapter_json(const config::AdapterSection& a) {
  json j{{"finetuning_type", a.finetuning_type}};
  if (a.lora()) {
    j.update({{"lora_rank", a.lora_rank}, {"lora_alpha", a.lora_alpha > 0 ? a.lora_alpha : 2.0 * static_cast<double>(a.lora_rank)},
              {"lora_dropout", a.lora_dropout}, {"lora_target", a.lora_target}, {"use_dora", a.use_dora},
              {"use_rslora", a.use_rslora}, {"additional_target", a.additional_target}});
  } else if (a.oft()) {
    j.update({{"oft_rank", a.oft_rank}, {"oft_block_size", a.oft_block_size}, {"lora_target", a.lora_target},
              {"additional_target", a.additional_target}});
  } else if (a.freeze()) {
    j.update({{"freeze_trainable_layers", a.freeze_trainable_layers},
              {"freeze_trainable_modules", a.freeze_trainable_modules}, {"freeze_extra_modules", a.freeze_extra_modules}});
  }
  return j;
}

std::string prefetch_text(const config::ParallelSection& p, const ZeroCommDepths& d) {
  if (p.zero_stage != 3) return "none (parameters stay whole)";
  if (d.prefetch_units == 0) return "none (prefetch_bucket_mb 0)";
  return fmt::format("{} unit{} ahead of the one computing", d.prefetch_units, d.prefetch_units == 1 ? "" : "s");
}

json parallel_json(const config::ParallelSection& p, const MemoryPrediction& m, int64_t world) {
  json j{{"strategy", strategy_name(p, world)}, {"zero_stage", p.zero_stage}, {"source", p.sharding_source}};
  if (!p.sharded()) {
    j["ddp"] = {{"bucket_cap_mb", p.ddp_bucket_cap_mb}, {"reduce_dtype", p.ddp_reduce_dtype},
                {"grad_sink", p.ddp_grad_sink}, {"sparse_embedding", p.ddp_sparse_embedding}};
    return j;
  }
  json z{{"overlap_comm", p.overlap_comm}, {"reduce_bucket_mb", p.reduce_bucket_mb},
         {"allgather_bucket_mb", p.allgather_bucket_mb}, {"prefetch_bucket_mb", p.prefetch_bucket_mb},
         {"prefetch", prefetch_text(p, m.zero_comm)}, {"prefetch_units", m.zero_comm.prefetch_units},
         {"reductions_in_flight", m.zero_comm.reductions_in_flight},
         {"update_gathers_in_flight", m.zero_comm.update_gathers_in_flight},
         {"offload", p.offload}, {"offload_ratio", p.offload_ratio}, {"pin_memory", p.pin_memory}};
  if (p.offloaded()) {
    z["host_units"] = m.offloaded_units;
    z["copy_streams"] = p.offload_copy_streams;
    z["device_norm"] = p.offload_device_norm;
  }
  j["zero"] = z;
  return j;
}

json terms_json(const std::vector<MemoryTerm>& terms) {
  json out = json::array();
  for (const auto& t : terms) out.push_back({{"kind", t.kind}, {"bytes", t.bytes}, {"what", t.what}});
  return out;
}

json memory_json(const MemoryPrediction& m) {
  return {{"gpu_per_rank", {{"peak_bytes", m.gpu_peak()}, {"peak_phase", m.peak_phase}, {"dominant", m.dominant().kind},
                            {"terms", terms_json(m.gpu)}, {"allocator_slack_bytes", m.allocator_slack}}},
          {"host_per_rank", {{"bytes", m.host_total()}, {"terms", terms_json(m.host)}}}};
}

json kernels_json(const config::JobPlan& p, const model::ModelConfig& mc, const WorldLayout& w) {
  const auto& k = p.model.kernels;
  auto refusal = cuda_graphs_refusal(p, w);
  if (refusal.empty() && mc.moe.num_experts > 0) refusal = "mixture-of-experts layers";
  return {{"fused_kernels", k.fused_kernels}, {"lean_recompute", k.lean_recompute}, {"fused_lora", k.fused_lora},
          {"fp32_weight_grads", k.fp32_weight_grads}, {"fused_ce", k.fused_ce}, {"varlen_attention", k.varlen_attention},
          {"cuda_graphs", k.cuda_graphs}, {"cuda_graph_bucket", k.cuda_graph_bucket}, {"grouped_mm", k.grouped_mm},
          {"cuda_graphs_apply", refusal.empty()}, {"cuda_graphs_off_because", refusal}};
}

}  // namespace

std::string cuda_graphs_refusal(const config::JobPlan& p, const WorldLayout& w) {
  if (!p.model.kernels.cuda_graphs) return "LF_CUDA_GRAPHS=0";
  if (w.world() > 1 || p.parallel.sharded()) return "more than one process or ZeRO (collectives and unit hooks)";
  if (p.adapter.lora() && p.adapter.lora_dropout > 0) return "lora_dropout > 0";
  if (p.data.neat_packing) return "neat_packing";
  return "";
}

json plan_summary(const config::JobPlan& p, const model::ModelConfig& mc, const WorldLayout& w) {
  config::check_expert_parallel(p, w.world(), mc.moe.num_experts);
  // The model's counts (as LLaMA-Factory's "trainable params" line), and what one rank holds: under
  // expert parallelism E / ep of each sparse layer's experts (the units and the memory are per rank).
  const int64_t ep = p.parallel.expert_parallel_size;
  const auto counts = parameter_counts(mc, p.adapter);
  const auto units = unit_parameters(mc, p.adapter, ep);
  const auto memory = predict_memory(p, mc, w);
  json j;
  j["model"] = {{"path", p.model.model_name_or_path}, {"architecture", mc.architecture_name}, {"layers", mc.num_layers},
                {"hidden_size", mc.hidden_size}, {"intermediate_size", mc.intermediate_size},
                {"vocab_size", mc.vocab_size}, {"heads", mc.num_heads}, {"kv_heads", mc.num_kv_heads},
                {"tie_word_embeddings", mc.tie_word_embeddings}, {"parameters", counts.total},
                {"trainable", counts.trainable}, {"frozen", counts.frozen}};
  if (ep > 1) {
    const auto mine = parameter_counts(mc, p.adapter, ep);
    j["model"]["per_rank"] = {{"parameters", mine.total}, {"trainable", mine.trainable}, {"frozen", mine.frozen}};
  }
  const auto layout = model::model_layout(mc);
  if (layout.moe_layers > 0) {
    // Each token passes through k of E experts: the active parameters FLOPs and MFU count.
    j["model"]["active_parameters"] = static_cast<int64_t>(layout.active_params());
    j["model"]["experts"] = {{"num_experts", mc.moe.num_experts}, {"top_k", mc.moe.top_k},
                             {"expert_intermediate_size", mc.moe.intermediate_size},
                             {"shared_expert_intermediate_size", mc.moe.shared_expert_intermediate_size},
                             {"sparse_layers", layout.moe_layers},
                             {"aux_loss_coef", p.model.moe_aux_loss_coef && *p.model.moe_aux_loss_coef > 0
                                                   ? *p.model.moe_aux_loss_coef
                                                   : mc.moe.output_router_logits ? mc.moe.router_aux_loss_coef : 0.0}};
  }
  j["adapter"] = adapter_json(p.adapter);
  j["world"] = {{"nnodes", w.nnodes}, {"nproc_per_node", w.nproc_per_node}, {"world_size", w.world()}};
  j["batch"] = {{"per_device_train_batch_size", p.schedule.per_device_train_batch_size},
                {"gradient_accumulation_steps", p.schedule.gradient_accumulation_steps},
                {"global_batch", config::global_batch(p.schedule, w.world())}, {"row_tokens", memory.row_tokens},
                {"cutoff_len", p.data.cutoff_len}, {"packing", p.data.packing}};
  j["parallel"] = parallel_json(p.parallel, memory, w.world());
  if (ep > 1)
    j["parallel"]["expert_parallel"] = {{"size", ep}, {"experts_per_rank", mc.moe.num_experts / ep},
                                        {"dispatch", "all_to_all"}};
  j["units"] = units_json(units);
  j["precision"] = {{"compute", dtype_name(p.precision)},
                    {"weights", p.adapter.peft() ? dtype_name(p.precision) + " frozen base, fp32 adapters" : "fp32 master weights"},
                    {"loss_scaling", p.precision.fp16 ? "dynamic" : "none"}};
  if (p.precision.fp8) {  // which GEMMs run in FP8 (lf/model/fp8_linear.h); the worker refuses a GPU without FP8
    const bool dw_fp8 = quant::fp8_weight_grad_in_fp8(quant::fp8_recipe_from_name(p.precision.fp8_recipe));
    j["precision"]["fp8"] = fmt::format(
        "{} recipe: the decoder linears' forward and input-gradient GEMMs{} in FP8 (dimensions divisible by 16); "
        "attention, norms, router, embeddings, LM head in {}",
        p.precision.fp8_recipe,
        p.adapter.lora() ? " (the base stored in e4m3)"
        : dw_fp8         ? " and weight-gradient GEMMs"
                         : " (weight-gradient GEMMs in " + dtype_name(p.precision) + ")",
        dtype_name(p.precision));
  }
  j["checkpointing"] = {{"gradient_checkpointing", p.model.gradient_checkpointing},
                        {"lean_recompute", p.model.kernels.lean_recompute}};
  j["kernels"] = kernels_json(p, mc, w);
  j["memory"] = memory_json(memory);
  return j;
}

}  // namespace lf::plan
