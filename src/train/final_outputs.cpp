// When training ends: the perf line (steady-state speed, as the peer benchmark measures it),
// the final evaluation, and the files HF / LLaMA-Factory write (train_results.json,
// trainer_state.json, eval_results.json, all_results.json, the loss plots, the model).
#include <c10/core/CachingDeviceAllocator.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "lf/common/log.h"
#include "lf/common/output_set.h"
#include "lf/common/remove_tree.h"
#include "lf/common/progress_deadline.h"
#include "lf/quant/fp8.h"
#include "phase_profile.h"
#include "pissa_outputs.h"
#include "trainer_state.h"

namespace lf::train {
namespace fs = std::filesystem;

namespace {

// This process's peak resident set (VmHWM): the host memory a run needed, pinned offload
// buffers included once touched.
int64_t host_peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "VmHWM:  123 kB"
  return 0;
}

// The median step after 3 warm-up steps, and the median of each phase over the same steps.
// Per device: this rank's tokens (`rank_tokens` of this session).
json perf_report(const TrainSummary& sum, int64_t first_step, int64_t rank_tokens, const PhaseClock& phases,
                 const c10::Device& device, const ModelFlops& flops) {
  std::vector<const StepRecord*> steady;
  for (const auto& r : sum.steps)
    if (r.step > first_step + 3 || sum.steps.size() <= 3) steady.push_back(&r);
  std::sort(steady.begin(), steady.end(), [](auto* a, auto* b) { return a->seconds < b->seconds; });
  static const StepRecord kNone{};
  const auto* med = steady.empty() ? &kNone : steady[steady.size() / 2];
  // Unpadded tokens over the same steps' summed time: with unpacked rows every step has its
  // own shape, and a median step's padded count says little.
  double steady_real = 0, steady_s = 0;
  for (const auto* r : steady) {
    steady_real += static_cast<double>(r->num_tokens);
    steady_s += r->seconds;
  }
  json perf = {{"steps", sum.global_step},
               {"real_tokens_per_s", steady_s > 0 ? steady_real / steady_s : 0.0},
               {"median_step_s", med->seconds},
               {"tokens_per_s", med->seconds > 0 ? static_cast<double>(med->computed_tokens) / med->seconds : 0.0},
               {"real_tokens_per_s_overall",
                static_cast<double>(rank_tokens) / std::max(sum.runtime_s, 1e-9)},
               {"peak_memory_gib", static_cast<double>(sum.peak_memory_bytes) / (1 << 30)},
               // The median step's model FLOPs (active parameters: a mixture of experts' k of E) per second,
               // and their share of 790 TFLOP/s, the H200's measured dense bf16 ceiling (shared/bench's mfu_vs_790).
               {"model_tflops_per_s", med->seconds > 0 ? step_model_flops(flops, static_cast<double>(med->computed_tokens),
                                                                          static_cast<double>(med->padded_token_positions)) /
                                                             med->seconds / 1e12
                                                       : 0.0},
               {"host_peak_rss_gib", static_cast<double>(host_peak_rss_bytes()) / (1 << 30)},
               {"device", device.str()}};
  if (phases.enabled()) {
    json by_phase;
    for (int p = 0; p < kNumPhases; ++p) {
      std::vector<double> v;
      for (const auto* r : steady) v.push_back(r->phase_seconds[static_cast<size_t>(p)]);
      std::sort(v.begin(), v.end());
      by_phase[phase_name(p)] = v.empty() ? 0.0 : v[v.size() / 2];
    }
    perf["phases_median_s"] = by_phase;
  }
  return perf;
}

// LLaMA-Factory's plot_loss(output_dir, keys): the stage's keys (objective.h: loss, and
// rewards/accuracies for dpo, rewards/chosen for kto), then eval_loss (and rm's eval_accuracy); the
// file of key k is training_{k with '/' as '_'}.png.
void plot_losses(const json& log_history, const fs::path& out, const std::string& title, bool eval_on,
                 std::vector<std::string> keys) {
  keys.push_back("eval_loss");
  if (std::find(keys.begin(), keys.end(), "eval_accuracy") == keys.end() && eval_on &&
      !log_history.empty() && std::any_of(log_history.begin(), log_history.end(),
                                          [](const json& e) { return e.contains("eval_accuracy"); }))
    keys.push_back("eval_accuracy");
  for (const auto& key : keys) {
    std::vector<std::pair<double, double>> pts;
    for (const auto& e : log_history)
      if (e.contains(key) && e.contains("step")) pts.emplace_back(e["step"].get<double>(), e[key].get<double>());
    std::string file = key;
    std::replace(file.begin(), file.end(), '/', '_');
    const fs::path png = out / fmt::format("training_{}.png", file);
    if (plot_curve(png, pts, key, fmt::format("training {} of {}", key, title)))
      spdlog::info("figure saved at: {}", (fs::path(title) / png.filename()).string());  // where it is moved
    else if (key.rfind("eval_", 0) != 0 || eval_on)
      spdlog::warn("no metric {} to plot", key);
  }
}

// What the allocator held at its peak: a CUDA graph's pool is reserved, not "allocated", between replays.
double peak_reserved_gib(const c10::Device& device) {
  const auto stats = c10::getDeviceAllocator(c10::DeviceType::CUDA)->getDeviceStats(device.index());
  return static_cast<double>(stats.reserved_bytes[0].peak) / (1 << 30);
}

// Which GEMMs ran in FP8, and MFU against H100 / H200's dense FP8 peak (1979 TFLOP/s).
void add_fp8_perf(json& perf, const config::JobPlan& c) {
  const std::string hp = c.precision.bf16 ? "bf16" : c.precision.fp16 ? "fp16" : "fp32";
  const auto recipe = quant::fp8_recipe_from_name(c.precision.fp8_recipe);
  perf["fp8"] = fmt::format("{}: decoder linears' forward and input-gradient GEMMs{}; attention, norms, embeddings, "
                            "LM head in {}",
                            c.precision.fp8_recipe,
                            c.adapter.lora() ? " (LoRA's base stored in e4m3; the adapters in high precision)"
                            : !quant::fp8_weight_grad_in_fp8(recipe) ? " (weight-gradient GEMMs in " + hp + ")"
                                                                     : " and weight-gradient GEMMs",
                            hp);
  // rowwise: where its gradient GEMMs' row scales went (train/fp8_device.h's choice)
  if (quant::fp8_rowwise(recipe))
    perf["fp8_gradient_scaling"] = quant::fp8_rowwise_scales_in_gemm() ? "in the GEMM" : "a pass after the GEMM";
  perf["mfu_vs_fp8_1979"] = perf["model_tflops_per_s"].get<double>() / 1979.0;
}

}  // namespace

void Trainer::State::finish(TrainSummary& sum, const TrainPlan& plan, const LoopState& loop,
                            const PhaseClock& phases) {
  sum.global_step = loop.global_step;
  sum.runtime_s = seconds_since(logs.start);
  sum.train_loss = loop.global_step > 0 ? loop.total_loss / static_cast<double>(loop.global_step) : 0.0;
  sum.tokens_seen = counts.tokens_seen;
  sum.epoch = loop.epoch;
  sum.late_reads = stepper.late_reads;
  // The device's peak (the CUDA caching allocator's); on a CPU run the process's peak RSS.
  sum.peak_memory_bytes =
      device.is_cuda()
          ? c10::getDeviceAllocator(c10::DeviceType::CUDA)->getDeviceStats(device.index()).allocated_bytes[0].peak
          : host_peak_rss_bytes();
  auto perf = perf_report(sum, counts.first_step, counts.rank_tokens_seen - counts.first_rank_tokens, phases, device,
                          model_flops);
  perf["mfu_vs_790"] = perf["model_tflops_per_s"].get<double>() / 790.0;
  if (device.is_cuda()) perf["peak_reserved_gib"] = peak_reserved_gib(device);
  if (stepper.graph) perf["cuda_graphs"] = stepper.graph->describe();
  // LF_LATE_READBACK: how many steps' numbers came back after the next step was launched (step_readback.cpp).
  perf["late_readback"] = fmt::format("{} of {} steps", sum.late_reads, sum.steps.size());
  if (c.precision.fp8) add_fp8_perf(perf, c);
  spdlog::info("perf: {}", perf.dump());

  // HF's speed_metrics("train", ...): samples = n x epochs, or max_steps x global batch.
  const double samples = c.schedule.max_steps > 0 ? static_cast<double>(plan.total * plan.layout.global_batch())
                                         : static_cast<double>(plan.num_examples) * c.schedule.num_train_epochs;
  const double runtime = std::max(sum.runtime_s, 1e-9);
  json metrics = {{"epoch", loop.epoch},
                  {"total_flos", counts.flos},
                  {"train_loss", sum.train_loss},
                  {"train_runtime", round_to(sum.runtime_s, 4)},
                  {"train_samples_per_second", round_to(samples / runtime, 3)},
                  {"train_steps_per_second", round_to(static_cast<double>(plan.total) / runtime, 3)}};
  if (c.logging.include_num_input_tokens_seen != "no") metrics["num_input_tokens_seen"] = counts.num_input_tokens_seen(c.logging.include_num_input_tokens_seen);
  json final_log = metrics;
  final_log["step"] = loop.global_step;
  log_event(final_log, json::object(), loop.global_step);
  // LLaMA-Factory evaluates once more at the end (do_eval). Every rank takes part (the
  // evaluation is split over ranks and summed); only rank 0 writes the result.
  double final_eval = std::nan("");
  double final_eval_s = 0;
  if (plan.eval_on) {
    const auto t0 = Clock::now();
    progress_reporter().evaluating(loop.global_step);
    final_eval = evaluate();
    final_eval_s = seconds_since(t0);
  }
  progress_reporter().saving(loop.global_step);
  // The outputs are one set (lf/common/output_set.h): written into a staging folder, then moved
  // into output_dir, where an earlier run's weights of another kind are removed.
  const fs::path out(c.output.output_dir);
  const fs::path staged = output_staging_dir(out);
  if (plan.outputs) remove_tree(staged);  // a crashed run's
  // Under a sharded strategy every rank takes part in gathering the weights.
  try {
    if (plan.outputs || (s.write_outputs && strategy->saving_is_collective())) save_model(staged);
  } catch (...) {
    if (plan.outputs) remove_tree(staged);  // a full disk must not stay full of a half set
    throw;
  }
  if (!plan.outputs) return;
  write_json_file(staged / "train_results.json", metrics, 4);
  write_json_file(staged / "trainer_state.json", trainer_state(loop.global_step, loop.epoch), 2);
  if (c.output.plot_loss) plot_losses(logs.log_history, staged, c.output.output_dir, plan.eval_on, objective->plot_keys());
  json all = metrics;
  if (plan.eval_on) {
    json ev = eval_metrics(final_eval, std::max(final_eval_s, 1e-9), loop.epoch);
    // HF's log() adds the count to the metrics dict evaluate() then returns (and LLaMA-Factory saves).
    if (c.logging.include_num_input_tokens_seen != "no") ev["num_input_tokens_seen"] = counts.num_input_tokens_seen(c.logging.include_num_input_tokens_seen);
    write_json_file(staged / "eval_results.json", ev, 4);
    for (auto& [k, v] : ev.items()) all[k] = v;
    // Not a trainer_log.jsonl line: LLaMA-Factory's LogCallback stops writing when training ends
    // (on_train_end), so its final evaluation is in eval_results.json / all_results.json only.
  }
  write_json_file(staged / "all_results.json", all, 4);
  place_output_set(staged, out);
  if (c.adapter.pissa_convert && s.lora) write_pissa_conversion(out);  // LLaMA-Factory's PissaConvertCallback
  spdlog::info("training done: {} steps in {:.1f}s, train_loss {:.4f}; outputs in {}", loop.global_step,
               sum.runtime_s, sum.train_loss, out.string());
}

}  // namespace lf::train
