#include "lf/train/trainer.h"

#include <ATen/ATen.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <map>

#include "lf/common/log.h"
#include "lf/common/progress_deadline.h"
#include "lf/model/key_padding.h"
#include "lf/model/lora.h"
#include "lf/model/value_head.h"
#include "lf/parallel/make_strategy.h"
#include "lf/train/data_order.h"
#include "lf/train/lm_loss.h"
#include "lf/train/router_loss_coef.h"
#include "attention_shapes.h"
#include "peak_flops.h"
#include "pissa_outputs.h"
#include "phase_profile.h"
#include "step_trace.h"
#include "trainer_state.h"
#include "lf/model/host_copies.h"

namespace lf::train {
namespace fs = std::filesystem;

int64_t total_train_steps(const config::JobPlan& c, int64_t n, int64_t world) {
  if (c.schedule.max_steps > 0) return c.schedule.max_steps;
  StepLayout l{c.schedule.per_device_train_batch_size, c.schedule.gradient_accumulation_steps, world};
  return static_cast<int64_t>(std::ceil(c.schedule.num_train_epochs * static_cast<double>(steps_per_epoch(n, l))));
}

at::Tensor Trainer::State::forward_loss_sum(const DeviceBatch& d, const at::Tensor& target_rows) {
  auto* hooks = strategy->unit_hooks();
  auto x = m.hidden_states(d.input_ids, d.position_ids, hooks, d.segment_ids);  // [B,T,C]
  return model::run_unit(hooks, m.head_unit(), x, [&](const at::Tensor& h) {
    const auto normed = m.final_norm(h);
    // pure_bf16's bf16 gradients rounded where HF's run rounds them (lm_loss.h).
    if (hf_bf16_rounding) return lm_head_loss_sum_unchunked(normed, m.lm_head_weight(), d.labels);
    return target_rows.defined() ? lm_head_loss_sum(normed, m.lm_head_weight(), d.labels, s.loss_chunk_rows,
                                                    target_rows, m.lm_head_grad_sink())
                                 : lm_head_loss_sum_all_rows(normed, m.lm_head_weight(), d.labels, s.loss_chunk_rows,
                                                             m.lm_head_grad_sink());
  });
}

at::Tensor Trainer::State::forward_loss_sum(const Batch& b) {
  const auto on = [&](const at::Tensor& t) { return model::to_device(t, device); };
  // segment_ids stay on the host: the model reads the sequence offsets there (neat_packing).
  const DeviceBatch d{on(b.input_ids), on(b.labels), on(b.position_ids), b.segment_ids, {}};
  return forward_loss_sum(d, target_rows_of(b.labels));
}

double Trainer::State::evaluate() {
  if (!s.eval || s.eval->size() == 0) return std::nan("");
  // The preference stages evaluate their own loss and metrics (objective.h); kept for eval_metrics.
  eval_extra = objective->evaluate();
  if (!eval_extra.is_null()) return eval_extra["eval_loss"].get<double>();
  c10::NoGradGuard no_grad;
  const bool was_training = m.training();
  m.set_training(false);
  const auto n = static_cast<int64_t>(s.eval->size());
  const int64_t bs = std::max<int64_t>(1, c.eval.per_device_eval_batch_size);
  double sum_of_means = 0;
  // Batches of bs consecutive examples; with several ranks, batch k goes to rank k % world.
  // Under a strategy whose collectives live in the forward, every rank runs every round.
  const int64_t batches = (n + bs - 1) / bs;
  const int64_t rounds = strategy->needs_every_forward() ? (batches + world - 1) / world : 0;
  int64_t round = 0;
  auto& router = m.router_aux_loss();
  for (int64_t begin = rank * bs; begin < n; begin += bs * world, ++round) {
    std::vector<int64_t> idx;
    for (int64_t i = begin; i < std::min(n, begin + bs); ++i) idx.push_back(i);
    const auto b = collate(*s.eval, idx, s.pad_id);
    if (aux_coef > 0) router.begin(model::to_device(b.attention_mask, device), 0.0);  // HF's eval loss includes it too
    const double sum = forward_loss_sum(b).item<double>();
    sum_of_means += b.num_targets > 0 ? sum / static_cast<double>(b.num_targets) : 0.0;
    if (aux_coef > 0) sum_of_means += aux_coef * router.value().item<double>();
    router.end();
  }
  for (; round < rounds; ++round) (void)forward_loss_sum(no_target_batch(s.pad_id));
  m.set_training(was_training);
  if (world > 1) sum_of_means = strategy->all_reduce_sum(sum_of_means);
  // LLaMA-Factory's eval_loss: the mean of the batches' mean losses. Its trainer gathers
  // with accelerator.gather (not gather_for_metrics), so HF's loss.repeat(eval_batch_size)
  // counts a short last batch as a full one.
  return sum_of_means / static_cast<double>(batches);
}

Trainer::Trainer(TrainerSetup setup) {
  LF_CHECK(setup.model != nullptr, ConfigError, "Trainer: no model");
  LF_CHECK(setup.train != nullptr && setup.train->size() > 0, ConfigError,
           "the training dataset is empty: nothing to train on (check dataset, max_samples and cutoff_len)");
  state_ = std::make_unique<State>(std::move(setup));
  auto& st = *state_;
  const auto& c = st.c;
  LF_CHECK(c.schedule.per_device_train_batch_size > 0 && c.schedule.gradient_accumulation_steps > 0, ConfigError,
           "per_device_train_batch_size ({}) and gradient_accumulation_steps ({}) must be positive",
           c.schedule.per_device_train_batch_size, c.schedule.gradient_accumulation_steps);
  st.stepper.fp16 = c.precision.fp16;
  st.hf_bf16_rounding = !c.precision.fp32_master() && st.m.lm_head_weight().scalar_type() != at::kFloat &&
                        model::pad_masked_logits(st.device);
  st.stepper.scaler = optim::DynamicLossScaler(st.s.loss_scaler);
  st.m.set_gradient_checkpointing(c.model.gradient_checkpointing);
  // The model's own flag, not the plan's: the observable of (disable_)gradient_checkpointing.
  spdlog::info("gradient checkpointing: {}", st.m.gradient_checkpointing()
                                                 ? "on (each decoder layer's activations recomputed in backward)"
                                                 : "off");
  st.strategy = st.s.strategy;
  if (!st.strategy) {
    parallel::StrategySetup ss;
    ss.model = st.s.model;
    ss.trainable = model::trainable_parameters(st.m, st.s.lora.has_value());
    if (st.s.value_head)
      for (auto& p : st.s.value_head->named_parameters()) ss.trainable.push_back(p);
    ss.lora = st.s.lora.has_value();
    ss.optim = c.optim;
    st.own_strategy = parallel::make_single_strategy(std::move(ss));
    st.strategy = st.own_strategy.get();
  }
  st.rank = st.strategy->rank();
  st.world = st.strategy->world();
  LF_CHECK(st.world == 1 || st.s.commit || !st.s.write_outputs, ConfigError,
           "world size {} writing outputs needs a checkpoint commit channel (TrainerSetup::commit)", st.world);
  // HF's num_parameters(exclude_embeddings=True) drops the nn.Embedding only (the embedding unit):
  // an untied lm_head counts (a tied one is the embedding itself, not listed apart).
  for (auto& p : st.m.named_parameters())
    if (p.unit != 0) st.non_embedding_params += p.tensor->numel();
  // peft's wrappers hold a copy of each module to save beside the original: HF counts both, except
  // an embedding's (nn.Embedding).
  for (auto& p : model::lora_parameters(st.m))
    if (p.unit != 0) st.non_embedding_params += p.tensor->numel();
  // The trainable parameters a token's weight gradients cover: an expert's share of k / E (MFU on
  // active parameters).
  std::map<const at::Tensor*, double> active;
  const auto params = st.m.named_parameters();
  for (size_t k = 0; k < params.size(); ++k) active[params[k].tensor] = st.m.layout().params[k].active;
  double trainable = 0;
  for (auto& p : model::trainable_parameters(st.m, st.s.lora.has_value())) {
    const auto it = active.find(p.tensor);
    trainable += static_cast<double>(p.tensor->numel()) * (it == active.end() ? 1.0 : it->second);
  }
  st.model_flops = model_flops(st.m, trainable);
  st.aux_coef = router_aux_loss_coef(c, st.m);
  st.aux_trains = router_aux_loss_trains(c, st.aux_coef);
  st.peak_flops = peak_flops_per_s(st.device, st.m.compute_dtype(), c.logging.peak_tflops);
  st.make_objective();
  // CUDA graphs capture the LM loss's micro-step; the preference stages' run eagerly.
  if (!c.objective.preference()) st.stepper.graph = st.make_graph();
  // After the graph: its bucket fixes the unpacked rows' shapes (before the first forward: DPO's reference pass).
  fit_attention_to_rows(c, st.stepper.pad_multiple, st.m, at::TensorOptions().dtype(st.m.compute_dtype()).device(st.device));
}

Trainer::~Trainer() = default;

double Trainer::evaluate() { return state_->evaluate(); }
void Trainer::save_model(const fs::path& dir) { state_->save_model(dir); }

// The step's numbers to the agent (its Prometheus endpoint and the step deadline read them).
void Trainer::State::report_progress(const StepRecord& r) {
  ProgressMetrics m;
  m.loss = r.loss;
  m.learning_rate = r.lr;
  m.grad_norm = r.grad_norm;
  m.epoch = r.epoch;
  m.tokens_per_s = static_cast<double>(r.num_tokens) / std::max(r.seconds, 1e-9);
  // The job's: lf_train_total_steps and the lf_train_tokens_total counter (rank 0's).
  m.total_steps = static_cast<double>(logs.total_steps);
  m.tokens = static_cast<double>(counts.tokens_seen);
  // The preference stages' metrics of this step (every rank's examples: the same on every rank).
  for (auto& [k, v] : last_step_metrics.items())
    if (v.is_number()) m.set(k, v.get<double>());
  if (peak_flops > 0)  // this rank's share of the step's model FLOPs over its time
    m.mfu = step_model_flops(model_flops, static_cast<double>(r.computed_tokens),
                             static_cast<double>(r.padded_token_positions)) /
            std::max(r.seconds, 1e-9) / peak_flops;
  // The communication left after backward: measured only under LF_PROFILE_PHASES=1.
  if (r.phase_seconds[static_cast<size_t>(Phase::kDdpFinish)] > 0)
    m.comm_exposed_s = r.phase_seconds[static_cast<size_t>(Phase::kDdpFinish)];
  progress_reporter().step_done(r.step, r.seconds, m);
}

std::vector<std::vector<int64_t>> Trainer::State::first_epoch_micro_batches(const TrainPlan& plan) const {
  const auto perm = epoch_permutation(plan.num_examples, static_cast<uint64_t>(c.seed), 0);
  const int64_t per_micro = plan.layout.micro_batch * plan.layout.world;
  std::vector<std::vector<int64_t>> out;
  // Only the steps the run takes (max_steps may end it inside the first epoch); a longer run's later epochs
  // hold the same examples.
  for (int64_t k = 0; k < std::min(plan.steps_per_epoch, plan.total); ++k) {
    auto micro = rank_micro_batches(perm, k, plan.layout, rank);
    const auto n_micro = (static_cast<int64_t>(step_examples(perm, k, plan.layout).size()) + per_micro - 1) / per_micro;
    micro.resize(static_cast<size_t>(n_micro));  // the rounds this rank has nothing in: empty
    for (auto& mb : micro) out.push_back(std::move(mb));
  }
  return out;
}

TrainPlan Trainer::State::make_plan() {
  TrainPlan p;
  p.num_examples = static_cast<int64_t>(s.train->num_examples());  // a pair is one example
  p.layout = {c.schedule.per_device_train_batch_size, c.schedule.gradient_accumulation_steps, world};
  p.steps_per_epoch = train::steps_per_epoch(p.num_examples, p.layout);
  const int64_t per_micro = p.layout.micro_batch * p.layout.world;
  p.micro_per_epoch = (p.num_examples + per_micro - 1) / per_micro;
  p.total = total_train_steps(c, p.num_examples, world);
  LF_CHECK(p.total > 0, ConfigError, "no optimizer steps to run (num_train_epochs {}, max_steps {})",
           c.schedule.num_train_epochs, c.schedule.max_steps);
  p.log_every = resolve_interval(c.logging.logging_steps, p.total);
  p.eval_on = s.eval && s.eval->size() > 0 && c.eval.eval_strategy != "no";
  p.eval_every = c.eval.eval_strategy == "steps" ? (c.eval.eval_steps ? resolve_interval(*c.eval.eval_steps, p.total) : p.log_every) : 0;
  p.save_every = c.output.save_strategy == "steps" ? resolve_interval(c.output.save_steps, p.total) : 0;
  p.outputs = s.write_outputs && rank == 0;
  logs.total_steps = p.total;
  logs.steps_per_epoch = p.steps_per_epoch;
  stepper.sched.kind = optim::parse_lr_schedule(c.schedule.lr_scheduler_type);
  stepper.sched.total_steps = p.total;
  stepper.sched.warmup_steps = optim::hf_warmup_steps(c.schedule.warmup_steps, c.schedule.warmup_ratio, p.total);
  return p;
}

TrainSummary Trainer::train() {
  auto& st = *state_;
  const auto& c = st.c;
  const auto plan = st.make_plan();
  if (st.device.is_cuda()) c10::getDeviceAllocator(c10::DeviceType::CUDA)->resetPeakStats(st.device.index());
  if (plan.outputs) {
    fs::create_directories(c.output.output_dir);
    // A new run starts a new log (LLaMA-Factory); a resumed one appends to it.
    if (st.s.resume_from.empty()) fs::remove(fs::path(c.output.output_dir) / "trainer_log.jsonl");
    st.logs.log_writer = std::make_unique<TrainerLogWriter>(fs::path(c.output.output_dir) / "trainer_log.jsonl");
    if (std::find(c.logging.report_to.begin(), c.logging.report_to.end(), "tensorboard") != c.logging.report_to.end())
      st.logs.tensorboard = tfevents::ScalarLog::open_run(c.output.output_dir);
  }
  const ProgressDisplay display(st.s.progress && st.rank == 0);  // one progress display per job
  spdlog::info("training: {} examples, {} optimizer steps ({}; {} steps per epoch, global batch {}), warmup {} steps, "
               "{} trainable parameters",
               plan.num_examples, plan.total,
               c.schedule.max_steps > 0 ? fmt::format("max_steps {}", c.schedule.max_steps)
                               : fmt::format("num_train_epochs {}", c.schedule.num_train_epochs),
               plan.steps_per_epoch, plan.layout.global_batch(), st.stepper.sched.warmup_steps, st.strategy->num_trainable());

  TrainSummary sum;
  sum.total_steps = plan.total;
  sum.warmup_steps = st.stepper.sched.warmup_steps;
  st.m.set_training(true);
  PhaseClock phases(st.device, st.c.logging.profile_phases);
  StepTrace trace(st.device, static_cast<int>(st.rank), st.c.logging);
  st.logs.start = Clock::now();
  LoopState loop;
  // Before a checkpoint's weights load: the reference is the model as the run starts.
  trace.step_begins(0);  // LF_PROFILE_TRACE_STEPS=0:N traces this pass too
  st.objective->prepare(st.first_epoch_micro_batches(plan));
  trace.step_ended(0);
  // pissa_convert: the adapter as this run starts (a resumed run keeps the one its first start saved).
  if (c.adapter.pissa_convert && st.s.lora &&
      (st.s.resume_from.empty() || !fs::exists(fs::path(c.output.output_dir) / "pissa_init")))
    save_pissa_init(st.m, *st.s.lora, *st.strategy, c.output.output_dir, c.model.model_name_or_path, plan.outputs);
  if (!st.s.resume_from.empty()) {
    progress_reporter().loading();
    loop = st.load_checkpoint(st.s.resume_from);
    spdlog::info("resuming from {} at step {}/{} (epoch {:.2f})", st.s.resume_from.string(), loop.global_step,
                 plan.total, loop.epoch);
  }
  st.counts.first_step = loop.global_step;
  st.counts.first_tokens = st.counts.tokens_seen;
  st.counts.first_input_tokens = st.counts.input_tokens_seen;
  st.counts.first_rank_tokens = st.counts.rank_tokens_seen;
  progress_reporter().training_begins(loop.global_step);
  // Every epoch has steps_per_epoch steps, so the cursor of step N is (N / spe, N % spe).
  for (int64_t epoch = loop.global_step / plan.steps_per_epoch; loop.global_step < plan.total; ++epoch)
    st.run_epoch(epoch, plan, loop, sum, phases, trace, display);
  st.finish(sum, plan, loop, phases);
  st.m.set_training(false);
  return sum;
}

void Trainer::State::run_epoch(int64_t epoch, const TrainPlan& plan, LoopState& loop, TrainSummary& sum,
                               PhaseClock& phases, StepTrace& trace, const ProgressDisplay& display) {
  const auto perm = epoch_permutation(plan.num_examples, static_cast<uint64_t>(c.seed), epoch);
  const int64_t per_micro = plan.layout.micro_batch * plan.layout.world;
  const int64_t first = epoch == loop.global_step / plan.steps_per_epoch ? loop.global_step % plan.steps_per_epoch : 0;
  int64_t micro_done = 0;  // micro-steps of this epoch so far (resumed: the skipped steps' too)
  for (int64_t k = 0; k < first; ++k)
    micro_done += (static_cast<int64_t>(step_examples(perm, k, plan.layout).size()) + per_micro - 1) / per_micro;
  std::optional<PendingStep> prev;  // launched, read once the next step is launched (step_readback.cpp)
  for (int64_t k = first; k < plan.steps_per_epoch && loop.global_step < plan.total; ++k) {
    trace.step_begins(loop.global_step + 1);
    auto p = run_step(perm, k, loop, plan, micro_done, phases, display);
    ++loop.global_step;
    trace.step_ended(loop.global_step);
    loop.epoch = static_cast<double>(epoch) +
                 static_cast<double>(micro_done) / static_cast<double>(plan.micro_per_epoch);
    p.rec.epoch = loop.epoch;
    if (prev) complete_step(*prev, plan, loop, sum, display), prev.reset(), ++stepper.late_reads;
    const bool last = loop.global_step == plan.total, epoch_end = k == plan.steps_per_epoch - 1;
    // HF also evaluates when training stops between two evaluations (steps: a last step that
    // is no multiple of eval_steps; epoch: max_steps or a fractional epoch ending mid-epoch).
    const bool eval_now = plan.eval_on && ((plan.eval_every > 0 && loop.global_step % plan.eval_every == 0) ||
                                           (c.eval.eval_strategy == "epoch" && epoch_end) || last);
    const bool save_now = (plan.save_every > 0 && loop.global_step % plan.save_every == 0) ||
                          (c.output.save_strategy == "epoch" && epoch_end) || (last && c.output.save_strategy != "no");
    // A step read late must not be one the loop acts on: its evaluation and checkpoint see this step's weights.
    if (!p.read && !last && !epoch_end && !eval_now && !save_now) {
      prev = std::move(p);
      continue;
    }
    complete_step(p, plan, loop, sum, display);
    if (eval_now) evaluate_and_log(loop, sum, display);
    if (save_now && s.write_outputs) {
      // Every rank: the ones that write little wait for rank 0 at the commit; the save deadline
      // covers that wait.
      progress_reporter().saving(loop.global_step);
      const auto t0 = Clock::now();
      save_checkpoint(loop);
      progress_reporter().note(&ProgressMetrics::checkpoint_s, seconds_since(t0));
    }
  }
  if (prev) complete_step(*prev, plan, loop, sum, display);  // not reached: an epoch's last step is read at once
}

}  // namespace lf::train
