// One optimizer step: the step's micro-steps (forward, backward), the strategy's events
// around them, the loss reduction, fp16 unscaling, clipping and the update (DESIGN
// "Training semantics": the loss is the sum of the step's target-token CEs over every
// micro-step and rank, divided by the step's target count, known before any backward).
#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/autograd.h>

#include <optional>

#include "lf/common/log.h"
#include "lf/model/grad_sink.h"
#include "lf/model/key_padding.h"
#include "lf/model/lora.h"
#include "lf/model/moe_experts.h"
#include "lf/train/lm_loss.h"
#include "phase_profile.h"
#include "trainer_state.h"
#include "lf/model/host_copies.h"

namespace lf::train {
namespace {

// The global generators' states, restored on scope exit: a forward that only keeps a rank in
// step with the others' collectives must not move its dropout stream.
class KeepRng {
 public:
  explicit KeepRng(c10::Device device) : device_(device) {
    cpu_ = at::globalContext().defaultGenerator(c10::Device(c10::DeviceType::CPU)).get_state();
    if (device_.is_cuda()) dev_ = at::globalContext().defaultGenerator(device_).get_state();
  }
  ~KeepRng() {
    auto cpu = at::globalContext().defaultGenerator(c10::Device(c10::DeviceType::CPU));
    cpu.set_state(cpu_);
    if (device_.is_cuda()) {
      auto dev = at::globalContext().defaultGenerator(device_);
      dev.set_state(dev_);
    }
  }

 private:
  c10::Device device_;
  at::Tensor cpu_, dev_;
};

}  // namespace

std::unique_ptr<Objective> make_lm_objective(Trainer::State& st);  // lm_objective.cpp

void Trainer::State::make_objective() {
  ObjectiveContext ctx;
  ctx.model = &m;
  ctx.strategy = strategy;
  ctx.train = s.train;
  ctx.eval = s.eval;
  ctx.plan = &c;
  ctx.pad_id = s.pad_id;
  ctx.chunk_rows = s.loss_chunk_rows;
  ctx.lora = s.lora.has_value();
  ctx.value_head = s.value_head;
  objective = make_preference_objective(ctx);
  if (!objective) objective = make_lm_objective(*this);
}

std::unique_ptr<MicroStepGraph> Trainer::State::make_graph() {
  StepGraphSetup g;
  g.device = device;
  bool routed = false;
  for (auto& p : model::trainable_parameters(m, s.lora.has_value())) {
    g.trainable.push_back(p.tensor);
    routed = routed || model::grad_route(*p.tensor) != nullptr;
  }
  g.single_process = world == 1 && strategy->unit_hooks() == nullptr && !routed;
  g.dropout = s.lora.has_value() && !s.lora->oft && c.adapter.lora_dropout > 0;  // OFT has no dropout
  g.neat_packing = c.data.neat_packing;
  g.host_routed_experts = m.layout().moe_layers > 0 &&
                          !model::grouped_experts_for(at::empty({0}, at::TensorOptions().dtype(m.compute_dtype()).device(device)));
  g.aux_under_scaler = aux_coef > 0 && stepper.fp16;
  g.requested = c.model.kernels.cuda_graphs;
  g.step = [this](const DeviceBatch& d, const at::Tensor& factor) {
    // The load-balancing loss as eager_micro_step runs it (its gradient weight, fixed without fp16's scaler,
    // is captured); its value joins the loss sum as a second output.
    auto& router = m.router_aux_loss();
    if (aux_coef > 0) router.begin(d.attention_mask, aux_step.grad_weight);
    auto loss = forward_loss_sum(d, /*target_rows=*/{});  // every row: shapes fixed by [B,T] alone
    const auto aux = aux_coef > 0 ? router.value().detach().to(at::kDouble) : at::Tensor();
    torch::autograd::backward({loss * factor});
    router.end();
    return aux.defined() ? at::stack({loss.detach().to(at::kDouble), aux}) : loss;
  };
  if (const auto why = step_graph_refusal(g); !why.empty()) {
    if (device.is_cuda()) spdlog::info("CUDA graphs: off ({})", why);
    return nullptr;
  }
  auto graph = make_micro_step_graph(std::move(g));
  // Packed rows all have cutoff_len's length already: bucketing would only pad them further.
  if (graph && !c.data.packing) stepper.pad_multiple = c.model.kernels.cuda_graph_bucket;
  return graph;
}

at::Tensor Trainer::State::eager_micro_step(const Batch& b, double factor, PhaseClock& phases) {
  auto& router = m.router_aux_loss();
  // The load-balancing loss counts this batch's real tokens; its nodes stay live through backward
  // (a checkpointed layer attaches its gradient when recomputed).
  if (aux_coef > 0) router.begin(model::to_device(b.attention_mask, device), aux_step.grad_weight);
  // pure_bf16 on padded rows: HF's attention (padding mask, kv heads repeated) through forward and backward
  // (a checkpointed layer's recompute included), so that each kv head's bf16 gradient is the sum of its query
  // heads' bf16 gradients as HF's repeat_kv backward rounds it (trainer_state.h hf_bf16_rounding).
  std::optional<model::KeyPaddingScope> pads;
  if (hf_bf16_rounding && b.attention_mask.defined() && b.num_tokens < b.input_ids.numel())
    pads.emplace(model::to_device(b.attention_mask.sum(1).clamp_min(1), device));
  at::Tensor loss_sum;
  {
    RECORD_USER_SCOPE("lf::forward");  // named spans for LF_PROFILE_TRACE
    loss_sum = forward_loss_sum(b);
  }
  if (aux_coef > 0) {
    aux_step.sum += router.value().detach().to(at::kDouble);
    ++aux_step.batches;
  }
  phases.lap(Phase::kForward);
  {
    RECORD_USER_SCOPE("lf::backward");
    torch::autograd::backward({loss_sum * factor});
  }
  router.end();
  phases.lap(Phase::kBackward);
  return loss_sum;
}

void Trainer::State::forward_backward_without_targets() {
  const KeepRng keep(device);
  const auto loss = forward_loss_sum(no_target_batch(s.pad_id));
  if (loss.requires_grad()) torch::autograd::backward({loss});
}

bool Trainer::State::update(double lr, double scale, int64_t step, const ProgressDisplay& display, double& grad_norm) {
  const bool found_inf = stepper.fp16 && strategy->unscale_gradients(scale);
  grad_norm = strategy->clip_grad_norm(found_inf ? 0.0 : c.optim.max_grad_norm);
  if (!found_inf) {
    strategy->optimizer_step(lr);
    ++stepper.sched_step;
  } else {
    display.clear();
    spdlog::warn("step {}: gradient overflow at loss scale {}; step skipped, scale lowered to {}", step, scale,
                 scale * 0.5);
  }
  if (stepper.fp16) stepper.scaler.update(found_inf);
  strategy->zero_grad();
  return found_inf;
}

PendingStep Trainer::State::run_step(const std::vector<int64_t>& perm, int64_t step_in_epoch, const LoopState& loop,
                                     const TrainPlan& plan, int64_t& micro_done, PhaseClock& phases,
                                     const ProgressDisplay& display) {
  const auto step_start = Clock::now();
  phases.start();
  const auto& layout = plan.layout;
  const auto micro = rank_micro_batches(perm, step_in_epoch, layout, rank);
  const auto examples = step_examples(perm, step_in_epoch, layout);
  // The divisor from every rank's micro-batches, before any backward (DESIGN "Loss").
  std::vector<std::vector<int64_t>> every_rank;
  for (int64_t r = 0; r < world; ++r)
    for (auto& mb : r == rank ? micro : rank_micro_batches(perm, step_in_epoch, layout, r)) every_rank.push_back(mb);
  const double denom = objective->step_divisor(every_rank);
  const double lr = c.optim.learning_rate * stepper.sched.factor(stepper.sched_step);
  const double scale = stepper.fp16 ? stepper.scaler.scale() : 1.0;
  at::Tensor loss_acc = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(device));
  aux_step = {aux_trains ? aux_coef * scale : 0.0, at::zeros_like(loss_acc), 0};  // eager_micro_step adds to it
  StepRecord rec;
  // Micro-steps of the whole step (equal on every rank; this rank's may run out first).
  const int64_t per_micro = layout.micro_batch * layout.world;
  const int64_t n_micro = (static_cast<int64_t>(examples.size()) + per_micro - 1) / per_micro;
  for (int64_t k = 0; k < n_micro; ++k) {
    strategy->before_micro_step(k == n_micro - 1);
    if (k >= static_cast<int64_t>(micro.size())) {
      if (strategy->needs_every_forward() || objective->collective_micro_steps()) objective->idle_micro_step();
      continue;
    }
    const auto ms = objective->micro_step(micro[static_cast<size_t>(k)], scale / denom, phases);
    loss_acc += ms.loss.detach().to(at::kDouble);
    rec.num_tokens += ms.tokens;
    rec.padded_tokens += ms.padded;
    rec.computed_tokens += ms.computed;
    rec.padded_token_positions += ms.positions;
  }
  {
    RECORD_USER_SCOPE("lf::ddp_finish");
    strategy->after_backward();
  }
  phases.lap(Phase::kDdpFinish);
  std::optional<at::RecordFunction> optimizer_span;  // from here to zero_grad
  optimizer_span.emplace(at::RecordScope::USER_SCOPE);
  optimizer_span->before("lf::optimizer");
  micro_done += n_micro;
  PendingStep p;
  rec.step = loop.global_step + 1;
  rec.epoch = loop.epoch;  // run_epoch sets the fractional epoch after the step
  rec.lr = lr;
  rec.loss_scale = scale;
  rec.num_targets = static_cast<int64_t>(denom);
  p.rec = rec;
  p.loss_sum = loss_acc;
  if (aux_coef > 0) p.aux_sum = aux_step.sum, p.aux_batches = aux_step.batches;
  p.metric_sums = objective->take_metric_sums();  // the objective's, in the same reduction
  p.denom = denom;
  p.started = step_start;
  if (late_readback(phases)) p.grad_norm = strategy->clip_grad_norm_on_device(c.optim.max_grad_norm);
  // Undefined: read now, then update() (fp16's scaler, several ranks, or a strategy that clips on the host: ZeRO).
  if (p.grad_norm.defined()) {  // nothing here waits for the device
    std::vector<at::Tensor> scalars{loss_acc, p.grad_norm, p.aux_sum.defined() ? p.aux_sum : at::zeros_like(loss_acc)};
    if (p.metric_sums.defined()) scalars.push_back(p.metric_sums);
    p.staged = model::HostScalars(scalars);  // queued before the update: read_step waits for no more
    strategy->optimizer_step(lr);
    ++stepper.sched_step;
    strategy->zero_grad();
  } else {
    read_step(p, plan, loop);  // the step's one host sync, before its update
    p.rec.skipped = update(lr, scale, loop.global_step + 1, display, p.rec.grad_norm);
  }
  optimizer_span.reset();
  phases.lap(Phase::kOptimizer);
  p.rec.seconds = seconds_since(step_start);
  p.rec.phase_seconds = phases.take();
  return p;
}

}  // namespace lf::train
