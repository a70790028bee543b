// The plan summary as text (plan_summary.h): one aligned line per section, from the JSON object.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lf/plan/plan_summary.h"

namespace lf::plan {
namespace {

using nlohmann::json;

std::string millions(const json& n) {
  const double v = n.get<double>();
  return v >= 1e9 ? fmt::format("{:.2f}B", v / 1e9) : v >= 1e6 ? fmt::format("{:.2f}M", v / 1e6) : fmt::format("{:.0f}", v);
}

std::string on(const json& j, const char* key, const char* name) { return j[key].get<bool>() ? name : ""; }

std::string model_line(const json& m) {
  auto s = fmt::format("{} ({}): {} layers, hidden {}, vocab {}, {} parameters, {} trainable", m["path"].get<std::string>(),
                       m["architecture"].get<std::string>(), m["layers"].get<int64_t>(), m["hidden_size"].get<int64_t>(),
                       m["vocab_size"].get<int64_t>(), millions(m["parameters"]), millions(m["trainable"]));
  if (m.contains("per_rank"))  // expert parallelism: a rank holds its share of the experts
    s += fmt::format(" (per rank: {}, {} trainable)", millions(m["per_rank"]["parameters"]),
                     millions(m["per_rank"]["trainable"]));
  if (m.contains("experts")) {
    const auto& e = m["experts"];
    s += fmt::format("; experts: {} of {} per token in {} sparse layers, {} parameters active per token",
                     e["top_k"].get<int64_t>(), e["num_experts"].get<int64_t>(), e["sparse_layers"].get<int64_t>(),
                     millions(m["active_parameters"]));
    if (e["aux_loss_coef"].get<double>() > 0) s += fmt::format(", load-balancing loss x {}", e["aux_loss_coef"].get<double>());
  }
  return s;
}

std::string adapter_line(const json& a) {
  const auto type = a["finetuning_type"].get<std::string>();
  if (type == "lora")
    return fmt::format("lora rank {} alpha {} dropout {} on {}{}", a["lora_rank"].get<int64_t>(), a["lora_alpha"].get<double>(),
                       a["lora_dropout"].get<double>(), fmt::join(a["lora_target"].get<std::vector<std::string>>(), ","),
                       a["use_dora"].get<bool>() ? " (DoRA)" : "");
  if (type == "oft")
    return fmt::format("oft {} on {}", a["oft_rank"].get<int64_t>() != 0
                                           ? fmt::format("rank {}", a["oft_rank"].get<int64_t>())
                                           : fmt::format("block size {}", a["oft_block_size"].get<int64_t>()),
                       fmt::join(a["lora_target"].get<std::vector<std::string>>(), ","));
  if (type == "freeze")
    return fmt::format("freeze: {} trainable layers ({})", a["freeze_trainable_layers"].get<int64_t>(),
                       fmt::join(a["freeze_trainable_modules"].get<std::vector<std::string>>(), ","));
  return type;
}

// Expert parallelism beside the strategy: "; expert parallel over 2 ranks, 4 experts a layer per rank (all_to_all)".
std::string expert_parallel_text(const json& p) {
  if (!p.contains("expert_parallel")) return "";
  const auto& e = p["expert_parallel"];
  return fmt::format("; expert parallel over {} ranks, {} experts a layer per rank ({})", e["size"].get<int64_t>(),
                     e["experts_per_rank"].get<int64_t>(), e["dispatch"].get<std::string>());
}

std::string parallel_line(const json& p) {
  std::string s = p["strategy"].get<std::string>() + expert_parallel_text(p);
  if (!p["source"].get<std::string>().empty()) s += fmt::format(" ({})", p["source"].get<std::string>());
  if (p.contains("ddp"))
    return p["strategy"] == "one process" ? s
                                          : s + fmt::format("; buckets {:.4g} MiB, gradients travel in {}",
                                                            p["ddp"]["bucket_cap_mb"].get<double>(),
                                                            p["ddp"]["reduce_dtype"].get<std::string>());
  const auto& z = p["zero"];
  s += fmt::format("; buckets: reduce {:.4g} MiB, allgather {:.4g} MiB, prefetch {:.4g} MiB{}; prefetch: {}; "
                   "reductions in flight: {}",
                   z["reduce_bucket_mb"].get<double>(), z["allgather_bucket_mb"].get<double>(),
                   z["prefetch_bucket_mb"].get<double>(), z["overlap_comm"].get<bool>() ? ", overlap_comm" : "",
                   z["prefetch"].get<std::string>(), z["reductions_in_flight"].get<int64_t>());
  if (z["offload"].get<std::string>() != "none")
    s += fmt::format("; offload {} (ratio {:.4g}: {} units on the host){}", z["offload"].get<std::string>(),
                     z["offload_ratio"].get<double>(), z["host_units"].get<int64_t>(),
                     z["pin_memory"].get<bool>() ? ", pinned" : "");
  return s;
}

std::string units_line(const json& units) {
  std::vector<std::string> parts;
  for (const auto& u : units) {
    auto part = fmt::format("{} {}{}", u["name"].get<std::string>(), millions(u["params"]), u["count"].get<int64_t>() > 1 ? " each" : "");
    if (u["trainable"].get<int64_t>() > 0 && u["trainable"] != u["params"]) part += fmt::format(" ({} trainable)", millions(u["trainable"]));
    parts.push_back(part);
  }
  return fmt::format("{}", fmt::join(parts, " | "));
}

std::string kernels_line(const json& k) {
  std::vector<std::string> on_paths;
  for (const auto& [key, name] : std::vector<std::pair<const char*, const char*>>{
           {"fused_kernels", "fused kernels"}, {"fused_lora", "fused LoRA"}, {"fp32_weight_grads", "fp32 weight grads"},
           {"fused_ce", "fused CE"}, {"varlen_attention", "varlen attention"}})
    if (!on(k, key, name).empty()) on_paths.push_back(name);
  const auto off = k["cuda_graphs_off_because"].get<std::string>();
  return fmt::format("{}; CUDA graphs {}", fmt::join(on_paths, ", "),
                     off.empty() ? fmt::format("on (bucket {})", k["cuda_graph_bucket"].get<int64_t>()) : "off: " + off);
}

std::string bytes_line(const json& mem, const char* side) {
  const auto& m = mem[side];
  std::vector<std::string> parts;
  for (const auto& t : m["terms"]) parts.push_back(fmt::format("{} {}", t["kind"].get<std::string>(), format_bytes(t["bytes"].get<double>())));
  if (std::string(side) == "host_per_rank")
    return parts.empty() ? "none pinned (no offload)" : fmt::format("{}: {}", format_bytes(m["bytes"].get<double>()), fmt::join(parts, ", "));
  return fmt::format("peak {} at the {}: {} (+ allocator reserve ~{})", format_bytes(m["peak_bytes"].get<double>()),
                     m["peak_phase"].get<std::string>(), fmt::join(parts, ", "),
                     format_bytes(m["allocator_slack_bytes"].get<double>()));
}

}  // namespace

std::string plan_summary_text(const json& s) {
  std::vector<std::pair<std::string, std::string>> lines;
  lines.push_back({"model", model_line(s["model"])});
  lines.push_back({"adapter", adapter_line(s["adapter"])});
  const auto& w = s["world"];
  lines.push_back({"world", fmt::format("{} node(s) x {} rank(s) = {} rank(s)", w["nnodes"].get<int64_t>(),
                                        w["nproc_per_node"].get<int64_t>(), w["world_size"].get<int64_t>())});
  const auto& b = s["batch"];
  lines.push_back({"batch", fmt::format("global {} = {} per device x {} accumulation x {} rank(s); rows of {} tokens{}",
                                        b["global_batch"].get<int64_t>(), b["per_device_train_batch_size"].get<int64_t>(),
                                        b["gradient_accumulation_steps"].get<int64_t>(), w["world_size"].get<int64_t>(),
                                        b["row_tokens"].get<int64_t>(), b["packing"].get<bool>() ? " (packed)" : " at most")});
  lines.push_back({"parallel", parallel_line(s["parallel"])});
  lines.push_back({"units", units_line(s["units"]) +
                                (s["parallel"].contains("expert_parallel") ? " (per rank: this rank's experts)" : "")});
  const auto& p = s["precision"];
  lines.push_back({"precision", fmt::format("{} compute; {}{}", p["compute"].get<std::string>(), p["weights"].get<std::string>(),
                                            p["loss_scaling"] == "dynamic" ? ", dynamic loss scaling" : "")});
  if (p.contains("fp8")) lines.push_back({"fp8", p["fp8"].get<std::string>()});
  const auto& c = s["checkpointing"];
  lines.push_back({"checkpointing", !c["gradient_checkpointing"].get<bool>() ? "off"
                                    : c["lean_recompute"].get<bool>() ? "every layer (lean recompute)" : "every layer"});
  lines.push_back({"kernels", kernels_line(s["kernels"])});
  lines.push_back({"gpu / rank", bytes_line(s["memory"], "gpu_per_rank")});
  lines.push_back({"host / rank", bytes_line(s["memory"], "host_per_rank")});
  if (s.contains("data")) {
    const auto& d = s["data"];
    lines.push_back({"data", d.contains("skipped") ? "not counted: " + d["skipped"].get<std::string>()
                             : fmt::format("{} train / {} eval examples, {} train tokens{}", d["train_examples"].get<int64_t>(),
                                           d["eval_examples"].get<int64_t>(), d["train_tokens"].get<int64_t>(),
                                           d["from_cache"].get<bool>() ? " (tokenized cache)" : "")});
  }
  std::string out;
  for (const auto& [name, value] : lines) out += fmt::format("  {:<14} {}\n", name, value);
  return out;
}

}  // namespace lf::plan
