#include "lf/train/trainer.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "lf/common/log.h"
#include "lf/common/progress_deadline.h"
#include "lf/model/checkpointing.h"
#include "lf/model/lora.h"
#include "lf/train/data_order.h"
#include "lf/train/lm_loss.h"
#include "phase_profile.h"
#include "step_trace.h"
#include "trainer_state.h"

namespace lf::train {
namespace fs = std::filesystem;

int64_t total_train_steps(const config::TrainConfig& c, int64_t n, int64_t world) {
  if (c.max_steps > 0) return c.max_steps;
  StepLayout l{c.per_device_train_batch_size, c.gradient_accumulation_steps, world};
  return static_cast<int64_t>(std::ceil(c.num_train_epochs * static_cast<double>(steps_per_epoch(n, l))));
}

at::Tensor Trainer::State::forward_loss_sum(const Batch& b, bool training) {
  auto ids = b.input_ids.to(device);
  auto labels = b.labels.to(device);
  auto x = m.embed(ids);  // [B,T,C]
  const auto rope = m.rope(ids.size(1));
  const bool ckpt = training && c.gradient_checkpointing && c10::GradMode::is_enabled();
  for (const auto& layer : m.layers())
    x = ckpt ? model::checkpointed_layer_forward(layer, x, rope, training) : layer.forward(x, rope, training);
  auto h = m.final_norm(x);
  auto loss = lm_head_loss_sum(h, m.lm_head_weight(), labels, s.loss_chunk_rows, target_rows_of(b.labels),
                               m.lm_head_grad_sink());
  return loss;
}

double Trainer::State::evaluate() {
  if (!s.eval || s.eval->size() == 0) return std::nan("");
  c10::NoGradGuard no_grad;
  const bool was_training = m.training();
  m.set_training(false);
  const auto n = static_cast<int64_t>(s.eval->size());
  const int64_t bs = std::max<int64_t>(1, c.per_device_eval_batch_size);
  double sum_of_means = 0;
  // Batches of bs consecutive examples; with several ranks, batch k goes to rank k % world.
  for (int64_t begin = s.rank * bs; begin < n; begin += bs * s.world) {
    std::vector<int64_t> idx;
    for (int64_t i = begin; i < std::min(n, begin + bs); ++i) idx.push_back(i);
    const auto b = collate(*s.eval, idx, s.pad_id);
    const double sum = forward_loss_sum(b, false).item<double>();
    sum_of_means += b.num_targets > 0 ? sum / static_cast<double>(b.num_targets) : 0.0;
  }
  m.set_training(was_training);
  if (s.world > 1) sum_of_means = s.all_reduce_sum(sum_of_means);
  // LLaMA-Factory's eval_loss: the mean of the batches' mean losses. Its trainer gathers
  // with accelerator.gather (not gather_for_metrics), so HF's loss.repeat(eval_batch_size)
  // counts a short last batch as a full one.
  const int64_t batches = (n + bs - 1) / bs;
  return sum_of_means / static_cast<double>(batches);
}

Trainer::Trainer(TrainerSetup setup) {
  LF_CHECK(setup.model != nullptr, ConfigError, "Trainer: no model");
  LF_CHECK(setup.train != nullptr && setup.train->size() > 0, ConfigError,
           "the training dataset is empty: nothing to train on (check dataset, max_samples and cutoff_len)");
  state_ = std::make_unique<State>(std::move(setup));
  auto& st = *state_;
  const auto& c = st.c;
  LF_CHECK(c.per_device_train_batch_size > 0 && c.gradient_accumulation_steps > 0, ConfigError,
           "per_device_train_batch_size ({}) and gradient_accumulation_steps ({}) must be positive",
           c.per_device_train_batch_size, c.gradient_accumulation_steps);
  st.fp16 = c.fp16;
  st.scaler = optim::DynamicLossScaler(st.s.loss_scaler);

  // Trainable parameters with HF names (the optimizer's decay groups use them).
  for (auto& p : model::trainable_parameters(st.m, st.s.lora.has_value()))
    st.trainable.emplace_back(p.name, *p.tensor);
  LF_CHECK(!st.trainable.empty(), ConfigError, "the model has no trainable parameters");
  LF_CHECK(st.s.world == 1 || (st.s.before_backward && st.s.after_backward && st.s.all_reduce_sum &&
                                (st.s.all_gather_bytes || !st.s.write_outputs)),
           ConfigError,
           "world size {} needs the data-parallel hooks (TrainerSetup::before_backward / after_backward / "
           "all_reduce_sum, and all_gather_bytes when it writes outputs)",
           st.s.world);
  optim::ParamGroup decay{{}, c.weight_decay}, no_decay{{}, 0.0};
  std::vector<std::pair<std::string, at::Tensor>> ordered;
  for (auto& [name, t] : st.trainable) (optim::hf_decays(name) ? decay : no_decay).params.push_back(t);
  // Keep `trainable` in the optimizer's flat order (decay group first) for checkpoints.
  for (auto& [name, t] : st.trainable)
    if (optim::hf_decays(name)) ordered.emplace_back(name, t);
  for (auto& [name, t] : st.trainable)
    if (!optim::hf_decays(name)) ordered.emplace_back(name, t);
  st.trainable = std::move(ordered);
  for (auto& [name, t] : st.trainable) st.params.push_back(t);
  optim::AdamWOptions ao;
  ao.lr = c.learning_rate;
  ao.beta1 = c.adam_beta1;
  ao.beta2 = c.adam_beta2;
  ao.eps = c.adam_epsilon;
  st.opt = std::make_unique<optim::AdamW>(std::vector<optim::ParamGroup>{decay, no_decay}, ao);

  // HF's num_parameters(exclude_embeddings=True) drops the nn.Embedding only: an untied
  // lm_head counts (a tied one is the embedding itself, not listed apart).
  for (auto& p : st.m.named_parameters())
    if (p.name != "model.embed_tokens.weight") st.non_embedding_params += p.tensor->numel();
  for (auto& p : model::lora_parameters(st.m)) st.non_embedding_params += p.tensor->numel();
}

Trainer::~Trainer() = default;

double Trainer::evaluate() { return state_->evaluate(); }
void Trainer::save_model(const fs::path& dir) { state_->save_model(dir); }

TrainSummary Trainer::train() {
  auto& st = *state_;
  const auto& c = st.c;
  const auto& data = *st.s.train;
  const auto n = static_cast<int64_t>(data.size());
  const StepLayout layout{c.per_device_train_batch_size, c.gradient_accumulation_steps, st.s.world};
  const int64_t spe = steps_per_epoch(n, layout);
  // HF's steps_in_epoch: micro-batches per epoch (for the fractional epoch).
  const int64_t micro_per_epoch = (n + layout.micro_batch * layout.world - 1) / (layout.micro_batch * layout.world);
  const int64_t total = total_train_steps(c, n, st.s.world);
  const bool on_cuda = st.device.is_cuda();
  if (on_cuda) c10::getDeviceAllocator(c10::DeviceType::CUDA)->resetPeakStats(st.device.index());
  LF_CHECK(total > 0, ConfigError, "no optimizer steps to run (num_train_epochs {}, max_steps {})", c.num_train_epochs,
           c.max_steps);
  st.total_steps = total;
  st.steps_per_epoch = spe;
  st.sched.kind = optim::parse_lr_schedule(c.lr_scheduler_type);
  st.sched.total_steps = total;
  st.sched.warmup_steps = optim::hf_warmup_steps(c.warmup_steps, c.warmup_ratio, total);
  const int64_t log_every = resolve_interval(c.logging_steps, total);
  const bool eval_on = st.s.eval && st.s.eval->size() > 0 && c.eval_strategy != "no";
  const int64_t eval_every =
      c.eval_strategy == "steps" ? (c.eval_steps ? resolve_interval(*c.eval_steps, total) : log_every) : 0;
  const int64_t save_every = c.save_strategy == "steps" ? resolve_interval(c.save_steps, total) : 0;
  const bool outputs = st.s.write_outputs && st.s.rank == 0;
  if (outputs) {
    fs::create_directories(c.output_dir);
    // A new run starts a new log (LLaMA-Factory); a resumed one appends to it.
    if (st.s.resume_from.empty()) fs::remove(fs::path(c.output_dir) / "trainer_log.jsonl");
    st.log_writer = std::make_unique<TrainerLogWriter>(fs::path(c.output_dir) / "trainer_log.jsonl");
  }
  if (st.s.rank != 0) st.s.progress = false;  // one progress display per job
  const bool tty = st.s.progress && isatty(2);
  // On a TTY the bar owns the last line: clear it before any log line.
  auto clear_bar = [tty] {
    if (tty) std::fprintf(stderr, "\r\033[K");
  };
  spdlog::info("training: {} examples, {} optimizer steps ({}; {} steps per epoch, global batch {}), warmup {} steps, "
               "{} trainable parameters",
               n, total,
               c.max_steps > 0 ? fmt::format("max_steps {}", c.max_steps)
                               : fmt::format("num_train_epochs {}", c.num_train_epochs),
               spe, layout.global_batch(), st.sched.warmup_steps,
               [&] {
                 int64_t k = 0;
                 for (auto& p : st.params) k += p.numel();
                 return k;
               }());

  TrainSummary sum;
  sum.total_steps = total;
  sum.warmup_steps = st.sched.warmup_steps;
  st.m.set_training(true);
  PhaseClock phases(st.device);
  StepTrace trace(st.device, st.s.rank);
  static_assert(std::tuple_size_v<decltype(StepRecord::phase_seconds)> == kNumPhases);
  st.start = Clock::now();
  int64_t global_step = 0;
  double epoch_f = 0, loss_since_log = 0, total_loss = 0;
  int64_t last_logged = 0;
  double last_grad_norm = 0;
  if (!st.s.resume_from.empty()) {
    progress_reporter().loading();
    const auto saved = st.load_checkpoint(st.s.resume_from);
    global_step = saved.at("global_step").get<int64_t>();
    epoch_f = saved.at("epoch").get<double>();
    const auto& loop = saved.at("loop");
    loss_since_log = loop.at("loss_since_log").get<double>();
    total_loss = loop.at("total_loss").get<double>();
    last_logged = loop.at("last_logged").get<int64_t>();
    spdlog::info("resuming from {} at step {}/{} (epoch {:.2f})", st.s.resume_from.string(), global_step, total,
                 epoch_f);
  }
  st.first_step = global_step;
  st.first_tokens = st.tokens_seen;
  progress_reporter().training_begins(global_step);
  // Every epoch has spe steps, so the cursor of step N is (N / spe, N % spe).
  const int64_t start_epoch = global_step / spe, start_step = global_step % spe;
  for (int64_t epoch = start_epoch; global_step < total; ++epoch) {
    const auto perm = epoch_permutation(n, static_cast<uint64_t>(c.seed), epoch);
    int64_t micro_done = 0;
    const int64_t first = epoch == start_epoch ? start_step : 0;
    for (int64_t s = 0; s < first; ++s)
      micro_done += (static_cast<int64_t>(step_examples(perm, s, layout).size()) + layout.micro_batch * layout.world -
                     1) / (layout.micro_batch * layout.world);
    for (int64_t s = first; s < spe && global_step < total; ++s) {
      const auto step_start = Clock::now();
      trace.step_begins(global_step + 1);
      phases.start();
      const auto micro = rank_micro_batches(perm, s, layout, st.s.rank);
      int64_t step_targets = 0;
      for (auto i : step_examples(perm, s, layout)) step_targets += hf_num_items(data, i);
      const double denom = static_cast<double>(std::max<int64_t>(1, step_targets));
      const double lr = c.learning_rate * st.sched.factor(st.sched_step);
      st.opt->set_lr(lr);
      const double scale = st.fp16 ? st.scaler.scale() : 1.0;
      at::Tensor loss_acc = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(st.device));
      int64_t step_tokens = 0, step_padded = 0;
      // Micro-steps of the whole step (equal on every rank; this rank's may run out first).
      const auto step_size = static_cast<int64_t>(step_examples(perm, s, layout).size());
      const int64_t n_micro = (step_size + layout.micro_batch * layout.world - 1) / (layout.micro_batch * layout.world);
      for (int64_t k = 0; k < n_micro; ++k) {
        if (st.s.before_backward) st.s.before_backward(k == n_micro - 1);
        if (k >= static_cast<int64_t>(micro.size())) continue;
        const auto& idx = micro[static_cast<size_t>(k)];
        const auto b = collate(data, idx, st.s.pad_id);
        at::Tensor loss_sum;
        {
          RECORD_USER_SCOPE("lf::forward");  // named spans for LF_PROFILE_TRACE
          loss_sum = st.forward_loss_sum(b, true);
        }
        phases.lap(Phase::kForward);
        {
          RECORD_USER_SCOPE("lf::backward");
          torch::autograd::backward({loss_sum * (scale / denom)});
        }
        phases.lap(Phase::kBackward);
        loss_acc += loss_sum.detach().to(at::kDouble);
        step_tokens += b.num_tokens;
        step_padded += b.input_ids.numel();
        st.flos += 6.0 * static_cast<double>(b.input_ids.numel()) * static_cast<double>(st.non_embedding_params);
      }
      if (st.s.after_backward) {
        RECORD_USER_SCOPE("lf::ddp_finish");
        st.s.after_backward();
      }
      phases.lap(Phase::kDdpFinish);
      std::optional<at::RecordFunction> optimizer_span;  // from here to zero_grad
      optimizer_span.emplace(at::RecordScope::USER_SCOPE);
      optimizer_span->before("lf::optimizer");
      micro_done += n_micro;
      double step_loss = loss_acc.item<double>() / denom;  // the step's one host sync
      if (st.s.world > 1) step_loss = st.s.all_reduce_sum(step_loss);
      LF_CHECK(std::isfinite(step_loss), NonFiniteLossError,
               "the training loss is {} at step {} of {} (epoch {:.2f}, lr {:.3g}); lower learning_rate, check the "
               "data, or use bf16 instead of fp16",
               step_loss, global_step + 1, total, epoch_f, lr);
      bool found_inf = false;
      if (st.fp16) found_inf = st.scaler.unscale(st.params);
      const double grad_norm = optim::clip_grad_norm(st.params, found_inf ? 0.0 : c.max_grad_norm);
      if (!found_inf) {
        st.opt->step();
        ++st.sched_step;
      } else {
        clear_bar();
        spdlog::warn("step {}: gradient overflow at loss scale {}; step skipped, scale lowered to {}",
                     global_step + 1, scale, scale * 0.5);
      }
      if (st.fp16) st.scaler.update(found_inf);
      st.opt->zero_grad();
      optimizer_span.reset();
      phases.lap(Phase::kOptimizer);
      ++global_step;
      trace.step_ended(global_step);
      st.tokens_seen += step_tokens;
      epoch_f = static_cast<double>(epoch) + static_cast<double>(micro_done) / static_cast<double>(micro_per_epoch);
      last_grad_norm = grad_norm;
      StepRecord rec{global_step, step_loss, lr,          grad_norm,   epoch_f,
                     found_inf,   scale,     step_targets, step_tokens, step_padded,
                     seconds_since(step_start)};
      rec.phase_seconds = phases.take();
      sum.steps.push_back(rec);
      progress_reporter().step_done(
          global_step, rec.seconds,
          json{{"loss", step_loss}, {"learning_rate", lr}, {"grad_norm", grad_norm}, {"epoch", epoch_f},
               {"tokens_per_s", static_cast<double>(step_tokens) / std::max(rec.seconds, 1e-9)},
               {"comm_exposed_s",  // the wait for DDP's last buckets; measured under LF_PROFILE_PHASES=1 only
                phases.enabled() ? json(rec.phase_seconds[static_cast<size_t>(Phase::kDdpFinish)]) : json()}}
              .dump());
      loss_since_log += step_loss;
      total_loss += step_loss;

      const bool last = global_step == total;
      if (log_every > 0 && global_step % log_every == 0) {
        json e = {{"epoch", epoch_f},
                  {"grad_norm", grad_norm},
                  {"learning_rate", lr},
                  {"loss", loss_since_log / static_cast<double>(global_step - last_logged)},
                  {"step", global_step}};
        if (st.fp16) e["loss_scale"] = scale;
        st.log_event(e, json::object(), global_step);
        if (!tty && st.s.progress)
          spdlog::info("step {}/{} loss {:.4f} lr {:.3e} grad_norm {:.3f} {:.0f} tok/s ETA {}", global_step, total,
                       e["loss"].get<double>(), lr, grad_norm,
                       static_cast<double>(st.tokens_seen - st.first_tokens) / std::max(seconds_since(st.start), 1e-9),
                       format_timedelta(seconds_since(st.start) / (global_step - st.first_step) * (total - global_step)));
        loss_since_log = 0;
        last_logged = global_step;
      }
      if (tty) {
        const double el = seconds_since(st.start);
        const int width = 30;
        const int filled = static_cast<int>(width * global_step / total);
        std::fprintf(stderr, "\r[%s%s] %lld/%lld loss %.4f lr %.3e %.0f tok/s ETA %s   ",
                     std::string(static_cast<size_t>(filled), '#').c_str(),
                     std::string(static_cast<size_t>(width - filled), '.').c_str(), static_cast<long long>(global_step),
                     static_cast<long long>(total), step_loss, lr, static_cast<double>(st.tokens_seen - st.first_tokens) / std::max(el, 1e-9),
                     format_timedelta(el / (global_step - st.first_step) * (total - global_step)).c_str());
        if (last) std::fprintf(stderr, "\n");
      }
      const bool epoch_end = s == spe - 1;
      // HF also evaluates when training stops between two evaluations (steps: a last step that
      // is no multiple of eval_steps; epoch: max_steps or a fractional epoch ending mid-epoch).
      if (eval_on && ((eval_every > 0 && global_step % eval_every == 0) || (c.eval_strategy == "epoch" && epoch_end) ||
                      last)) {
        const auto t0 = Clock::now();
        progress_reporter().evaluating(global_step);
        const double el = st.evaluate();
        progress_reporter().note("eval_loss", el);
        const double rt = seconds_since(t0);
        sum.evals.push_back({global_step, el});
        json e = {{"epoch", epoch_f},
                  {"eval_loss", el},
                  {"eval_runtime", round_to(rt, 4)},
                  {"eval_samples_per_second", round_to(static_cast<double>(st.s.eval->size()) / rt, 3)},
                  {"eval_steps_per_second",
                   round_to(std::ceil(static_cast<double>(st.s.eval->size()) / c.per_device_eval_batch_size) / rt, 3)},
                  {"step", global_step}};
        st.log_event(e, json::object(), global_step);
        clear_bar();
        spdlog::info("step {}/{} eval_loss {:.4f}", global_step, total, el);
      }
      const bool save_now = (save_every > 0 && global_step % save_every == 0) ||
                            (c.save_strategy == "epoch" && epoch_end) || (last && c.save_strategy != "no");
      if (save_now && st.s.write_outputs) {
        progress_reporter().saving(global_step);  // every rank: those that do not write wait for rank 0
        const auto save_t0 = Clock::now();
        const auto rng = st.rng_states_to_save();  // every rank: a collective when world > 1
        if (outputs)
          st.save_checkpoint(global_step, epoch_f,
                             {{"loss_since_log", loss_since_log}, {"total_loss", total_loss}, {"last_logged", last_logged}},
                             rng);
        progress_reporter().note("checkpoint_s", seconds_since(save_t0));
      }
    }
  }
  (void)last_grad_norm;
  sum.global_step = global_step;
  sum.runtime_s = seconds_since(st.start);
  sum.train_loss = global_step > 0 ? total_loss / static_cast<double>(global_step) : 0.0;
  sum.tokens_seen = st.tokens_seen;
  sum.epoch = epoch_f;
  if (on_cuda)
    sum.peak_memory_bytes = c10::getDeviceAllocator(c10::DeviceType::CUDA)
                                ->getDeviceStats(st.device.index())
                                .allocated_bytes[0]
                                .peak;
  {
    // Steady-state speed, as the peer benchmark measures it: median step after 3 warm-up steps.
    std::vector<const StepRecord*> steady;
    for (const auto& r : sum.steps)
      if (r.step > st.first_step + 3 || sum.steps.size() <= 3) steady.push_back(&r);
    std::sort(steady.begin(), steady.end(), [](auto* a, auto* b) { return a->seconds < b->seconds; });
    static const StepRecord kNone{};
    const auto* med = steady.empty() ? &kNone : steady[steady.size() / 2];
    json perf = {{"steps", global_step},
                 {"median_step_s", med->seconds},
                 {"tokens_per_s", med->seconds > 0 ? static_cast<double>(med->padded_tokens) / med->seconds : 0.0},
                 {"real_tokens_per_s_overall",
                  static_cast<double>(sum.tokens_seen - st.first_tokens) / std::max(sum.runtime_s, 1e-9)},
                 {"peak_memory_gib", static_cast<double>(sum.peak_memory_bytes) / (1 << 30)},
                 {"device", st.device.str()}};
    if (phases.enabled()) {  // the median of each phase over the same steady steps
      json by_phase;
      for (int p = 0; p < kNumPhases; ++p) {
        std::vector<double> v;
        for (const auto* r : steady) v.push_back(r->phase_seconds[static_cast<size_t>(p)]);
        std::sort(v.begin(), v.end());
        by_phase[phase_name(p)] = v.empty() ? 0.0 : v[v.size() / 2];
      }
      perf["phases_median_s"] = by_phase;
    }
    spdlog::info("perf: {}", perf.dump());
  }

  // HF's speed_metrics("train", ...): samples = n x epochs, or max_steps x global batch.
  const double samples = c.max_steps > 0 ? static_cast<double>(total * layout.global_batch())
                                         : static_cast<double>(n) * c.num_train_epochs;
  json metrics = {{"epoch", epoch_f},
                  {"total_flos", st.flos},
                  {"train_loss", sum.train_loss},
                  {"train_runtime", round_to(sum.runtime_s, 4)},
                  {"train_samples_per_second", round_to(samples / std::max(sum.runtime_s, 1e-9), 3)},
                  {"train_steps_per_second", round_to(static_cast<double>(total) / std::max(sum.runtime_s, 1e-9), 3)}};
  json final_log = metrics;
  final_log["step"] = global_step;
  st.log_event(final_log, json::object(), global_step);
  // LLaMA-Factory evaluates once more at the end (do_eval). Every rank takes part (the
  // evaluation is split over ranks and summed); only rank 0 writes the result.
  double final_eval = std::nan("");
  double final_eval_s = 0;
  if (eval_on) {
    const auto t0 = Clock::now();
    progress_reporter().evaluating(global_step);
    final_eval = st.evaluate();
    final_eval_s = seconds_since(t0);
  }
  progress_reporter().saving(global_step);
  if (outputs) {
    const fs::path out(c.output_dir);
    st.save_model(out);
    write_json_file(out / "train_results.json", metrics, 4);
    write_json_file(out / "trainer_state.json", st.trainer_state(global_step, epoch_f), 2);
    if (c.plot_loss) {
      for (const char* key : {"loss", "eval_loss"}) {
        std::vector<std::pair<double, double>> pts;
        for (const auto& e : st.log_history)
          if (e.contains(key) && e.contains("step")) pts.emplace_back(e["step"].get<double>(), e[key].get<double>());
        const fs::path png = out / fmt::format("training_{}.png", key);
        if (plot_curve(png, pts, key, fmt::format("training {} of {}", key, c.output_dir)))
          spdlog::info("figure saved at: {}", png.string());
        else if (std::string(key) == "eval_loss" && eval_on)
          spdlog::warn("no metric {} to plot", key);
      }
    }
    json all = metrics;
    if (eval_on) {
      const double el = final_eval;
      const double rt = std::max(final_eval_s, 1e-9);
      json ev = {{"epoch", epoch_f},
                 {"eval_loss", el},
                 {"eval_runtime", round_to(rt, 4)},
                 {"eval_samples_per_second", round_to(static_cast<double>(st.s.eval->size()) / rt, 3)},
                 {"eval_steps_per_second",
                  round_to(std::ceil(static_cast<double>(st.s.eval->size()) / c.per_device_eval_batch_size) / rt, 3)}};
      write_json_file(out / "eval_results.json", ev, 4);
      for (auto& [k, v] : ev.items()) all[k] = v;
      json ev_log = ev;
      ev_log["step"] = global_step;
      st.log_event(ev_log, json::object(), global_step);
    }
    write_json_file(out / "all_results.json", all, 4);
    spdlog::info("training done: {} steps in {:.1f}s, train_loss {:.4f}; outputs in {}", global_step, sum.runtime_s,
                 sum.train_loss, out.string());
  }
  st.m.set_training(false);
  return sum;
}

}  // namespace lf::train
