// ZeRO-1/2/3 (zero_strategy.h): units of flat groups (zero_units.h), the gradient sink that
// accumulates and reduce-scatters each unit's gradients, the unit hooks that gather and free
// stage 3's parameters, and AdamW over this rank's shard pieces.
#include "lf/parallel/zero_strategy.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <deque>
#include <optional>
#include <map>
#include <mutex>
#include <unordered_map>

#include "lf/ckpt/optimizer_state.h"
#include "lf/common/env_knobs.h"
#include "lf/common/error.h"
#include "lf/common/log.h"
#include "lf/model/causal_lm.h"
#include "lf/model/grad_sink.h"
#include "lf/model/lora.h"
#include "lf/model/tensor_io.h"
#include "lf/model/unit_hooks.h"
#include "lf/offload/host_adamw.h"
#include "lf/optim/adamw.h"
#include "host_pinning.h"
#include "host_step_pipeline.h"
#include "offload_copies.h"
#include "host_sums.h"
#include "zero_units.h"

namespace lf::parallel {
namespace {

using Clock = std::chrono::steady_clock;

// The unit of a parameter by its HF / PEFT name: 0 the embedding, 1 + i decoder layer i, the
// head (final norm, untied lm_head) after the last layer.
int64_t unit_of(const std::string& name, int64_t head) {
  if (name == "model.embed_tokens.weight") return 0;
  const auto at = name.find("model.layers.");
  if (at == std::string::npos) return head;
  return 1 + std::stoll(name.substr(at + 13));
}

struct Unit {
  bool host = false;  // offload: this unit's trainable state and step are on the host (offload_ratio)
  FlatGroup train;   // trainable parameters
  FlatGroup frozen;  // stage 3: the frozen ones (a LoRA base); else empty (left replicated)
  // Trainable state, [train.shard] fp32 (this rank's shard).
  at::Tensor master, exp_avg, exp_avg_sq, grad_shard;
  at::Tensor grad_flat;  // [train.padded] fp32: stage 1 the step's sum; 2, 3 this micro-step's
  at::Tensor rs_out;     // stage 2, 3: this micro-step's reduced shard
  comm::WorkPtr reduce;
  at::Tensor frozen_shard;  // stage 3: [frozen.shard] of the frozen values, compute dtype
  // Offload, unless the parameters are offloaded too: this rank's compute-dtype shard on the
  // device, refreshed from the updated master after each host step (stage 3: the gathers'
  // input; stage 2: gathered into the full parameters before the unit's next forward).
  at::Tensor dev_shard;
  std::vector<HostPinning> pinned;  // offload on a GPU: master, moments, gradient page-locked
  bool refreshed = true;            // offload, stage 2: the full parameters hold this step's values
  bool grad_fresh = true;  // offload: no gradient in grad_shard yet this step (the first is copied, not added)
  std::vector<ShardPiece> pieces;
  int64_t outstanding = 0;  // uses in this micro-step whose gradient is still due
  bool had_grad = false, launched = false;
};

class ZeroImpl final : public ZeroStrategy, public model::GradSink, public model::UnitHooks {
 public:
  ZeroImpl(const StrategySetup& s, const ZeroOptions& o);
  ~ZeroImpl() override;

  std::string describe() const override;
  // Stage 3 gathers in the forward; offload's stage 2 gathers each unit's updated shard there.
  model::UnitHooks* unit_hooks() override { return opt_.stage == 3 || offload_ ? this : nullptr; }
  bool needs_every_forward() const override { return opt_.stage == 3 || offload_; }
  void before_micro_step(bool last) override;
  void after_backward() override;
  std::vector<double> all_reduce_sums(std::vector<double> values) override;
  at::Tensor all_gather_bytes(const at::Tensor& mine) override;
  bool unscale_gradients(double scale) override;
  double clip_grad_norm(double max_norm) override;
  void optimizer_step(double lr) override;
  void zero_grad() override;
  int64_t optimizer_steps() const override { return steps_; }
  int64_t num_trainable() const override { return trainable_numel_; }
  std::vector<std::string> save_optimizer_state(const std::filesystem::path& dir) override;
  void load_optimizer_state(const std::filesystem::path& dir, int64_t steps) override;
  at::Tensor full_parameter(const std::string& name) override;
  bool saving_is_collective() const override { return true; }
  void load_full_parameter(const std::string& name, const at::Tensor& value) override;
  ZeroMemory resident_bytes() const override;
  ZeroMemory predicted_bytes() const override;
  std::vector<ZeroEvent> events() const override;

  // model::GradSink (autograd thread).
  bool expect(const at::Tensor& param) override;
  void take(const at::Tensor& param, const at::Tensor& grad) override;
  bool routes_same_dtype() const override { return true; }
  bool expect_rows(const at::Tensor& param) override { return expect(param); }
  void take_rows(const at::Tensor& param, const at::Tensor& ids, const at::Tensor& rows) override;

  // model::UnitHooks (stage 3).
  void before_forward(int64_t unit, bool recompute) override;
  void after_forward(int64_t unit, bool recompute) override;
  void before_backward(int64_t unit) override;
  void after_backward(int64_t unit) override;

 private:
  struct Where {
    int64_t unit = 0;
    size_t param = 0;
  };
  void build_unit(int64_t u, std::vector<model::NamedParam> trainable, std::vector<model::NamedParam> frozen);
  const Where& where(const at::Tensor& param) const;
  void log(const char* what, int64_t unit);
  at::Tensor& grad_flat(Unit& u);
  int64_t host_unit_count() const {
    return std::count_if(units_.begin(), units_.end(), [](const Unit& u) { return u.host; });
  }
  bool direct_grads(const Unit& u) const { return world() == 1 && opt_.stage >= 2 && !u.host; }
  // offload_ratio: which units' state goes to the host (from the head down, while it fits).
  std::vector<bool> host_units(const std::vector<std::vector<model::NamedParam>>& train) const;
  // AdamW on the device over the pieces of the units that are not on the host.
  void device_step(double lr);
  void arrived(int64_t unit);
  void launch_ready();
  void launch(int64_t unit);
  void retire(int64_t unit);
  void flush();
  void gather(int64_t unit, bool wait);
  void release(int64_t unit);
  // The gradient shards of the units on the host (true) or on the device (false), or of all.
  std::vector<at::Tensor> grad_shards(std::optional<bool> host = std::nullopt) const;
  c10::Device device() const { return device_; }
  // Where the trainable state lives: the device, or (offload) host memory, pinned on a GPU run.
  at::TensorOptions state_options(const Unit& u) const;
  // Offload: the unit's gather queued on the up stream, behind its input's copy up.
  void start_gather_from_host(int64_t unit);
  // Offload (the pipeline's thread): a unit's host AdamW, then its compute-dtype shard up to the
  // device where the next forward reads it (stage 3 keeps it there; stage 2 gathers it in refresh).
  void host_update(Unit& u, double lr, double grad_scale, int64_t step);
  void stage_up(int64_t unit);
  void refresh(int64_t unit);  // offload, stage 2 (training thread): gather the updated shard

  ZeroOptions opt_;
  bool offload_ = false;
  std::unique_ptr<offload::HostThreadPool> pool_;
  double grad_scale_ = 1.0;  // offload: the unscale and clip factors, applied inside the host step
  comm::Communicator& comm_;
  c10::Device device_;
  double weight_decay_;
  double loraplus_ = 0;  // LoRA+ ratio (0: off)
  optim::AdamWOptions adam_;
  bool tied_ = false;
  int64_t head_ = 0;
  std::vector<Unit> units_;
  std::unordered_map<const c10::TensorImpl*, Where> where_;
  std::vector<at::Tensor> routed_;
  int64_t trainable_numel_ = 0, frozen_numel_ = 0, replicated_frozen_bytes_ = 0;
  int64_t steps_ = 0;
  // The micro-step in progress (between before_micro_step and the next one / after_backward).
  bool open_ = false, syncing_ = false;
  int64_t next_to_launch_ = 0;  // units launch from the head down, in the same order on every rank
  std::deque<int64_t> pending_;  // stage 2, 3: launched reductions not yet added to the shards
  std::unique_ptr<OffloadCopies> copies_;       // offload: the copies down and up on streams of their own
  std::unique_ptr<HostStepPipeline> pipeline_;  // offload; after units_: it stops before they go
  // Offload: the step's gradient norm squared, summed on the device from each unit's reduced
  // gradient before it goes down (one micro-step a step, else the host's norm; under fp16 the
  // loss-scaled gradients' norm, times grad_scale_ as the host's is).
  at::Tensor device_sq_norm_;
  const bool use_device_norm_ = knob_bool("LF_OFFLOAD_DEVICE_NORM").value_or(true);
  bool device_norm_valid_ = use_device_norm_;
  // Saving: the last unit whose full fp32 values were gathered.
  int64_t cached_unit_ = -1;
  at::Tensor cached_values_;
  mutable std::mutex events_mu_;
  std::vector<ZeroEvent> events_;
};

ZeroImpl::ZeroImpl(const StrategySetup& s, const ZeroOptions& o)
    : ZeroStrategy(s.rank, s.world), opt_(o), comm_(*s.communicator), device_(s.trainable.front().tensor->device()),
      weight_decay_(s.weight_decay), loraplus_(s.loraplus_lr_ratio == 1.0 ? 0.0 : s.loraplus_lr_ratio) {
  LF_CHECK(o.stage >= 1 && o.stage <= 3, ConfigError, "zero_stage {}: expected 1, 2 or 3", o.stage);
  offload_ = o.offload != Offload::kNone;
  LF_CHECK(!offload_ || o.stage >= 2, ConfigError,
           "offload needs zero_stage 2 or 3 (stage 1 keeps every gradient on the device); got zero_stage {}", o.stage);
  LF_CHECK(o.offload != Offload::kParams || o.stage == 3, ConfigError,
           "offloading the parameters needs zero_stage 3 (stage {} keeps them on the device)", o.stage);
  LF_CHECK(o.offload_ratio > 0 && o.offload_ratio <= 1, ConfigError,
           "offload_ratio {}: expected a share of the trainable parameters in (0, 1]", o.offload_ratio);
  if (offload_) {
    pool_ = std::make_unique<offload::HostThreadPool>(std::max(1, o.host_threads));
  }
  adam_.lr = s.learning_rate;
  adam_.beta1 = s.adam_beta1;
  adam_.beta2 = s.adam_beta2;
  adam_.eps = s.adam_epsilon;
  auto& m = *s.model;
  tied_ = m.config().tie_word_embeddings;
  head_ = m.head_unit();
  std::map<std::string, bool> trainable;
  for (const auto& p : s.trainable) {
    LF_CHECK(!s.lora || p.name.find(".lora_") != std::string::npos, ConfigError,
             "ZeRO with modules trained fully beside LoRA (additional_target: {}) is not supported yet; use "
             "zero_stage 0 (data parallel)", p.name);
    trainable[p.name] = true;
  }
  std::vector<std::vector<model::NamedParam>> train(head_ + 1), frozen(head_ + 1);
  auto all = m.named_parameters();
  for (auto& p : model::lora_parameters(m)) all.push_back(p);
  for (auto& p : all) {
    const int64_t u = unit_of(p.name, head_);
    if (trainable.count(p.name)) {
      train[u].push_back(p);
      trainable_numel_ += p.tensor->numel();
    } else if (o.stage == 3) {
      frozen[u].push_back(p);
      frozen_numel_ += p.tensor->numel();
    } else {
      replicated_frozen_bytes_ += static_cast<int64_t>(p.tensor->nbytes());
    }
  }
  LF_CHECK(trainable_numel_ > 0, ConfigError, "the model has no trainable parameters");
  units_.resize(head_ + 1);
  const auto host = host_units(train);
  for (int64_t u = 0; u <= head_; ++u) {
    units_[u].host = host[u];
    build_unit(u, std::move(train[u]), std::move(frozen[u]));
  }
  next_to_launch_ = head_;
  if (offload_) {
    copies_ = std::make_unique<OffloadCopies>(device_, head_ + 1);
    pipeline_ = std::make_unique<HostStepPipeline>();
  }
}

std::vector<bool> ZeroImpl::host_units(const std::vector<std::vector<model::NamedParam>>& train) const {
  std::vector<bool> host(train.size(), false);
  if (!offload_) return host;
  double smallest = 0;
  // As many whole units as fit in the ratio's share of the trainable parameters, so that the host
  // memory checked at start (the ratio x 16 bytes a parameter, up to the shards' padding) bounds
  // what is pinned; taken from the head down, skipping a unit that does not fit: the
  // next forward runs the earlier ones (on the device, updated at once) while the host works.
  const double budget = opt_.offload_ratio * static_cast<double>(trainable_numel_);
  double taken = 0;
  for (int64_t u = static_cast<int64_t>(train.size()) - 1; u >= 0; --u) {
    double numel = 0;
    for (const auto& p : train[u]) numel += static_cast<double>(p.tensor->numel());
    if (numel > 0 && (smallest == 0 || numel < smallest)) smallest = numel;
    if (numel > 0 && taken + numel <= budget * (1 + 1e-12)) {
      host[u] = true;
      taken += numel;
    }
  }
  LF_CHECK(taken > 0, ConfigError,
           "offload_ratio {} offloads nothing: the smallest unit with trainable parameters holds {:.4f} of them (units "
           "go to the host whole); raise offload_ratio to at least that, or use offload: none",
           opt_.offload_ratio, smallest / static_cast<double>(trainable_numel_));
  return host;
}

ZeroImpl::~ZeroImpl() {
  // Offload: no copy may still read or write host or device memory that the members free
  // (an exception can unwind mid-step, with copies and the host step in flight).
  if (offload_) {
    try {
      if (pipeline_) pipeline_->wait_all();
      if (device_.is_cuda()) c10::impl::getDeviceGuardImpl(device_.type())->synchronizeDevice(device_.index());
    } catch (...) {  // the step's own error is already on its way
    }
  }
  for (const auto& t : routed_) model::set_grad_route(t, nullptr);
}

void ZeroImpl::build_unit(int64_t index, std::vector<model::NamedParam> train, std::vector<model::NamedParam> frozen) {
  c10::NoGradGuard no_grad;
  Unit& u = units_[index];
  const int64_t world = this->world();
  if (!train.empty()) {
    // Rank 0's values everywhere (as DDP broadcasts), in fp32: the master weights.
    int64_t numel = 0;
    for (const auto& p : train) numel += p.tensor->numel();
    const int64_t padded = (numel + world - 1) / world * world;
    auto values = flat_fp32_values(train, padded);
    comm_.broadcast(values, 0)->wait();
    u.train = make_flat_group(train, opt_.compute_dtype, rank(), world, /*trainable=*/true);
    u.train.flat.copy_(values);
    const auto so = state_options(u);
    u.master = at::empty({u.train.shard}, so);
    u.master.copy_(values.narrow(0, u.train.shard_begin(), u.train.shard));
    u.exp_avg = at::zeros({u.train.shard}, so);
    u.exp_avg_sq = at::zeros({u.train.shard}, so);
    u.grad_shard = at::zeros({u.train.shard}, so);
    if (u.host) {
      for (const auto* t : {&u.master, &u.exp_avg, &u.exp_avg_sq, &u.grad_shard})
        u.pinned.emplace_back(*t, device_.is_cuda());
      if (opt_.offload == Offload::kOptimizer)
        u.dev_shard = u.master.to(device_, opt_.compute_dtype, false, /*copy=*/true);
    }
    if (opt_.stage == 1) u.grad_flat = at::zeros({u.train.padded}, u.master.options().device(device_));
    u.pieces = u.train.pieces(u.master, u.grad_shard, u.exp_avg, u.exp_avg_sq);
    for (auto& piece : u.pieces) {
      piece.decays = optim::hf_decays(piece.name);
      for (const auto& p : train)
        if (p.name == piece.name) piece.lr_scale = optim::loraplus_lr_scale(p.name, p.tensor->dim(), loraplus_);
    }
    for (size_t i = 0; i < u.train.params.size(); ++i) {
      const auto& slot = *u.train.params[i].slot;
      where_[slot.unsafeGetTensorImpl()] = {index, i};
      model::set_grad_route(slot, this);
      routed_.push_back(slot);
    }
    if (opt_.stage == 3) release_storage(u.train);
  }
  if (!frozen.empty()) {
    u.frozen = make_flat_group(frozen, frozen.front().tensor->scalar_type(), rank(), world, /*trainable=*/false);
    u.frozen_shard = u.frozen.flat.narrow(0, u.frozen.shard_begin(), u.frozen.shard).clone();
    release_storage(u.frozen);
  }
}

std::string ZeroImpl::describe() const {
  const auto p = predicted_bytes();
  const double gib = 1 << 30;
  return fmt::format(
      "ZeRO-{}: rank {} of {} ({} backend, {} units); predicted bytes per rank: parameters {:.3f} GiB, gradients "
      "{:.3f} GiB, master weights {:.3f} GiB, optimizer moments {:.3f} GiB = {:.3f} GiB{}{}",
      opt_.stage, rank(), world(), comm_.backend(), units_.size(), p.params / gib, p.grads / gib, p.master / gib,
      p.moments / gib, p.total() / gib,
      offload_ ? fmt::format(" ({:.3f} GiB of it in host memory{}: {}{})", p.host / gib, device_.is_cuda() ? ", pinned" : "",
                             opt_.offload == Offload::kParams ? "parameters and optimizer offloaded" : "optimizer offloaded",
                             opt_.offload_ratio < 1 ? fmt::format(", {} of {} units (offload_ratio {})", host_unit_count(),
                                                                  units_.size(), opt_.offload_ratio)
                                                    : std::string())
               : std::string(),
      opt_.stage == 3 ? fmt::format(", + {:.3f} GiB per gathered unit (at most 2 at a time)", p.largest_unit / gib)
                      : std::string());
}

const ZeroImpl::Where& ZeroImpl::where(const at::Tensor& param) const {
  const auto it = where_.find(param.unsafeGetTensorImpl());
  LF_CHECK(it != where_.end(), BackendError, "ZeRO: a gradient for a parameter it does not hold");
  return it->second;
}

void ZeroImpl::log(const char* what, int64_t unit) {
  std::lock_guard lock(events_mu_);
  events_.push_back({what, unit, Clock::now()});
}

// ---- gradients

at::Tensor& ZeroImpl::grad_flat(Unit& u) {
  // One rank at stages 2 and 3 (not offloaded): the shard is the whole and nothing is reduced,
  // so backward adds straight into it (no buffer to zero, no pass to add it in afterwards).
  if (!u.grad_flat.defined() && direct_grads(u)) u.grad_flat = u.grad_shard;
  // Else on the device, offloaded or not: backward's gradients land here.
  if (!u.grad_flat.defined()) u.grad_flat = at::zeros({u.train.padded}, u.master.options().device(device_));
  return u.grad_flat;
}

bool ZeroImpl::expect(const at::Tensor& param) {
  auto& u = units_[where(param).unit];
  ++u.outstanding;
  return true;
}

void ZeroImpl::take(const at::Tensor& param, const at::Tensor& grad) {
  const auto& w = where(param);
  auto& u = units_[w.unit];
  const auto& fp = u.train.params[w.param];
  LF_CHECK(!u.launched, BackendError, "ZeRO: a gradient of {} arrived after unit {}'s reduction was issued", fp.name,
           w.unit);
  c10::NoGradGuard no_grad;
  grad_flat(u).narrow(0, fp.offset, fp.numel).view(fp.shape).add_(grad);
  arrived(w.unit);
}

void ZeroImpl::take_rows(const at::Tensor& param, const at::Tensor& ids, const at::Tensor& rows) {
  const auto& w = where(param);
  auto& u = units_[w.unit];
  const auto& fp = u.train.params[w.param];
  c10::NoGradGuard no_grad;
  grad_flat(u).narrow(0, fp.offset, fp.numel).view(fp.shape).index_add_(0, ids, rows.to(at::kFloat));
  arrived(w.unit);
}

void ZeroImpl::arrived(int64_t unit) {
  auto& u = units_[unit];
  u.had_grad = true;
  if (--u.outstanding == 0) launch_ready();
}

// Stage 1 reduces on the step's last micro-step only; 2 and 3 on every one. Units go from the
// head down (the order backward completes them), each once its gradients are all in.
void ZeroImpl::launch_ready() {
  if (opt_.stage == 1 && !syncing_) return;
  while (next_to_launch_ >= 0) {
    auto& u = units_[next_to_launch_];
    if (!u.train.empty()) {
      if (!(u.had_grad && u.outstanding == 0)) return;
      launch(next_to_launch_);
    }
    --next_to_launch_;
  }
}

void ZeroImpl::launch(int64_t unit) {
  auto& u = units_[unit];
  log("reduce_start", unit);
  u.launched = true;
  if (opt_.stage == 1) {
    u.reduce = comm_.reduce_scatter(u.grad_shard, grad_flat(u));
    pending_.push_back(unit);
    return;
  }
  if (world() == 1) {
    u.rs_out = grad_flat(u);  // the one shard is the whole: nothing to reduce
  } else {
    u.rs_out = at::empty({u.train.shard}, u.master.options().device(device_));
    u.reduce = comm_.reduce_scatter(u.rs_out, grad_flat(u));
  }
  pending_.push_back(unit);
  // At most two units' full gradients in flight: the third waits for the oldest.
  while (pending_.size() > 2) {
    retire(pending_.front());
    pending_.pop_front();
  }
}

void ZeroImpl::retire(int64_t unit) {
  auto& u = units_[unit];
  if (u.reduce) u.reduce->wait();
  u.reduce.reset();
  if (opt_.stage == 1) return;
  c10::NoGradGuard no_grad;
  if (direct_grads(u)) {
    // backward added into grad_shard itself
  } else if (!u.host) {
    u.grad_shard.add_(u.rs_out);
  } else if (u.grad_fresh) {
    // Its share of the norm while it is still on the device, then device -> pinned host on the
    // down stream: backward goes on meanwhile; the host reads it after the micro-step's
    // synchronisation (flush).
    if (device_norm_valid_ && !syncing_) device_norm_valid_ = false;  // micro-steps to come: the host's norm
    if (device_norm_valid_) {
      const auto sq = at::linalg_vector_norm(u.rs_out, 2).to(at::kDouble).square();
      device_sq_norm_ = device_sq_norm_.defined() ? device_sq_norm_ + sq : sq;
    }
    copies_->copy_down(u.grad_shard, u.rs_out);
    u.grad_fresh = false;
  } else {
    device_norm_valid_ = false;  // the step's gradient is a sum over micro-steps: the host's norm
    u.grad_shard.add_(u.rs_out.to(at::kCPU));  // later micro-steps of an accumulating step
  }
  u.rs_out = at::Tensor();
  u.grad_flat = at::Tensor();
}

// The micro-step's end: every unit reduced (a unit that got no gradient on this rank adds
// zeros: the other ranks' reductions need it), stage 3's parameters released.
void ZeroImpl::flush() {
  log("backward_returned", -1);
  if (opt_.stage > 1 || syncing_) {
    for (; next_to_launch_ >= 0; --next_to_launch_)
      if (!units_[next_to_launch_].train.empty()) launch(next_to_launch_);
    for (const int64_t unit : pending_) retire(unit);
    pending_.clear();
    // Offload: the gradients' copies to the host are done before the host reads them.
    if (offload_ && device_.is_cuda())
      c10::impl::getDeviceGuardImpl(device_.type())->synchronizeDevice(device_.index());
  }
  if (opt_.stage == 3)
    for (int64_t unit = 0; unit <= head_; ++unit) release(unit);
  for (auto& u : units_) {
    u.outstanding = 0;
    u.had_grad = u.launched = false;
  }
  next_to_launch_ = head_;
}

void ZeroImpl::before_micro_step(bool last) {
  if (open_) flush();
  else {
    std::lock_guard lock(events_mu_);
    events_.clear();  // one step's events (kept for the whole job they would grow without bound)
  }
  cached_unit_ = -1;
  cached_values_ = at::Tensor();
  open_ = true;
  syncing_ = last;
}

void ZeroImpl::after_backward() {
  LF_CHECK(open_ && syncing_, BackendError, "ZeRO: after_backward() without before_micro_step(true)");
  flush();
  open_ = false;
}

// ---- parameters (stage 3)

at::TensorOptions ZeroImpl::state_options(const Unit& u) const {
  // Offloaded: plain host memory, page-locked by HostPinning (not torch's pinned allocator).
  return at::TensorOptions().dtype(at::kFloat).device(u.host ? c10::Device(at::kCPU) : device_);
}

// Offloaded, a unit's trainable parameters are gathered on the up stream, behind their copy up:
// from the device shard the host step's thread refreshed (optimizer offloaded), or (parameters
// offloaded) from the fp32 master copied up now and cast on the device, as FSDP2's offload does
// (no compute-dtype copy in host memory). A prefetch so overlaps the compute of the unit before
// instead of holding the compute stream; gather(wait) makes the compute stream wait for it.
void ZeroImpl::start_gather_from_host(int64_t unit) {
  auto& u = units_[unit];
  allocate_storage(u.train);  // on the compute stream: its block is the model's
  copies_->on_up(
      unit,
      [&] {
        start_gather(u.train, comm_,
                     u.dev_shard.defined() ? u.dev_shard
                                           : u.master.to(device_, /*non_blocking=*/true).to(opt_.compute_dtype));
      },
      /*after_caller=*/true);
}

void ZeroImpl::gather(int64_t unit, bool wait) {
  auto& u = units_[unit];
  if (u.host && !u.train.empty() && !u.train.resident && !u.train.gather) {
    // Its host step first (the pipeline runs units in forward order); a prefetch never waits.
    if (!wait && !pipeline_->unit_done(unit)) return;
    pipeline_->wait_unit(unit);
  }
  for (auto* g : {&u.train, &u.frozen}) {
    if (g->empty()) continue;
    if (!g->resident && !g->gather) {
      log("gather_start", unit);
      if (world() == 1 && !u.host && g == &u.train) {
        // One rank: the fp32 master cast straight into the storage, one pass.
        allocate_storage(*g);
        c10::NoGradGuard no_grad;
        auto out = at::empty({0}, g->flat.options());
        out.set_(g->flat.storage(), 0, {g->padded}, {1});
        out.copy_(u.master);
        log("gather_done", unit);
        continue;
      }
      if (g == &u.train && u.host) start_gather_from_host(unit);
      else start_gather(*g, comm_, g == &u.train ? u.master.to(opt_.compute_dtype) : u.frozen_shard);
    }
    if (wait && g->gather) {
      g->gather->wait();
      if (g == &u.train && u.host) copies_->wait_up(unit);  // a gather queued on the up stream
      g->gather.reset();
      g->gather_input = at::Tensor();
      log("gather_done", unit);
    }
  }
}

void ZeroImpl::release(int64_t unit) {
  auto& u = units_[unit];
  for (auto* g : {&u.train, &u.frozen}) {
    if (g->gather) {  // never free what a collective still writes
      g->gather->wait();
      if (g == &u.train && u.host) copies_->wait_up(unit);
      g->gather.reset();
      g->gather_input = at::Tensor();
    }
    if (g->resident && !g->empty()) {
      release_storage(*g);
      log("release", unit);
    }
  }
}

void ZeroImpl::refresh(int64_t unit) {
  auto& u = units_[unit];
  if (u.refreshed || u.train.empty()) return;
  pipeline_->wait_unit(unit);
  copies_->wait_up(unit);
  start_gather(u.train, comm_, u.dev_shard);
  u.train.gather->wait();
  u.train.gather.reset();
  u.train.gather_input = at::Tensor();
  u.refreshed = true;
}

void ZeroImpl::before_forward(int64_t unit, bool recompute) {
  if (opt_.stage < 3) {  // offload's stage 2: the parameters stay; this step's values come up
    refresh(unit);
    if (unit == head_ && tied_) refresh(0);
    return;
  }
  gather(unit, true);
  if (unit == head_ && tied_) gather(0, true);  // the tied lm_head is the embedding
  if (opt_.prefetch && unit < head_) gather(unit + 1, false);
  log("forward_begin", unit);
}

void ZeroImpl::after_forward(int64_t unit, bool recompute) {
  log("forward_end", unit);
  if (opt_.stage < 3) return;
  if (recompute) return;  // its backward runs next, on these parameters
  if (unit == 0 && tied_) return;  // the head's loss uses it; released with the head
  release(unit);
  if (unit == head_ && tied_) release(0);
}

void ZeroImpl::before_backward(int64_t unit) {
  log("backward_begin", unit);
  if (opt_.stage < 3) return;
  // The embedding's backward reads no weight (its rows go to the sink); the others' do.
  if (unit == 0) return;
  gather(unit, true);
  if (opt_.prefetch && unit > 1) gather(unit - 1, false);
}

void ZeroImpl::after_backward(int64_t unit) {
  log("backward_end", unit);
  if (opt_.stage < 3) return;
  release(unit);
}

// ---- the update

std::vector<at::Tensor> ZeroImpl::grad_shards(std::optional<bool> host) const {
  std::vector<at::Tensor> out;
  for (const auto& u : units_)
    if (!u.train.empty() && (!host || *host == u.host)) out.push_back(u.grad_shard);
  return out;
}

namespace {

// The sum of the tensors' squared norms (one device per list), 0 for none.
double squared_norm(const std::vector<at::Tensor>& tensors) {
  if (tensors.empty()) return 0;
  return at::stack(at::_foreach_norm(tensors, 2)).to(at::kDouble).pow(2).sum().item<double>();
}

// 1 when a tensor holds an inf or a NaN (one device per list: one synchronisation), 0 for none.
double any_non_finite(const std::vector<at::Tensor>& tensors) {
  if (tensors.empty()) return 0;
  at::Tensor bad = at::zeros({}, tensors.front().options());
  for (const auto& g : tensors) bad = at::maximum(bad, at::logical_not(at::isfinite(g).all()).to(bad.scalar_type()));
  return bad.item<double>();
}

}  // namespace

std::vector<double> ZeroImpl::all_reduce_sums(std::vector<double> values) {
  return sum_over_ranks(comm_, std::move(values), device());
}

at::Tensor ZeroImpl::all_gather_bytes(const at::Tensor& mine) {
  auto in = mine.to(device());
  auto out = at::empty({comm_.world_size() * in.numel()}, in.options());
  comm_.all_gather(out, in)->wait();
  return out.view({comm_.world_size(), in.numel()}).cpu();
}

bool ZeroImpl::unscale_gradients(double scale) {
  if (pipeline_) pipeline_->wait_all();
  c10::NoGradGuard no_grad;
  auto grads = grad_shards();
  if (offload_) grad_scale_ /= scale;  // applied by the steps (host and device), not a pass of its own
  else at::_foreach_mul_(grads, 1.0 / scale);
  return all_reduce_sum(std::max(any_non_finite(grad_shards(false)), any_non_finite(grad_shards(true)))) > 0;
}

double ZeroImpl::clip_grad_norm(double max_norm) {
  if (pipeline_) pipeline_->wait_all();
  c10::NoGradGuard no_grad;
  // The squares of each shard's norm, summed over shards and ranks (the padding holds zeros).
  double local_sq = squared_norm(grad_shards(false));
  const auto host_grads = grad_shards(true);
  if (!host_grads.empty()) {
    // Offloaded, one micro-step: summed on the device as the gradients went down (no host pass).
    const bool on_device = device_norm_valid_ && device_sq_norm_.defined();
    log(on_device ? "grad_norm_device" : "grad_norm_host", -1);
    local_sq += on_device ? device_sq_norm_.item<double>() : squared_norm(host_grads);
  }
  // Offloaded gradients are not unscaled yet: their norm is grad_scale_ times the stored one.
  const double total = std::sqrt(all_reduce_sum(local_sq)) * (offload_ ? grad_scale_ : 1.0);
  if (max_norm > 0) {
    const double coef = std::min(1.0, max_norm / (total + 1e-6));
    if (coef < 1.0 && offload_) grad_scale_ *= coef;
    else if (coef < 1.0) at::_foreach_mul_(grad_shards(), coef);
  }
  return total;
}

void ZeroImpl::host_update(Unit& u, double lr, double grad_scale, int64_t step_count) {
  for (auto& piece : u.pieces) {
    offload::HostAdamWStep step;
    step.lr = lr * piece.lr_scale;
    step.beta1 = adam_.beta1;
    step.beta2 = adam_.beta2;
    step.eps = adam_.eps;
    step.weight_decay = piece.decays ? weight_decay_ : 0.0;
    step.step = step_count;
    step.grad_scale = static_cast<float>(grad_scale);
    offload::host_adamw_update(*pool_, piece.master.data_ptr<float>(), piece.exp_avg.data_ptr<float>(),
                               piece.exp_avg_sq.data_ptr<float>(), piece.grad.data_ptr<float>(), nullptr,
                               piece.end - piece.begin, step);
  }
}

// The fp32 master up on the up stream (async from page-locked memory) and cast into the
// device shard there; the gather or refresh that reads it waits on the device. Its readers of
// the last step are done: the step began after backward's synchronisation.
void ZeroImpl::stage_up(int64_t unit) {
  auto& u = units_[unit];
  if (u.dev_shard.defined()) copies_->copy_up(unit, u.dev_shard, u.master, /*after_caller=*/false);
}

void ZeroImpl::optimizer_step(double lr) {
  c10::NoGradGuard no_grad;
  ++steps_;
  if (!offload_) {
    device_step(lr);
    return;
  }
  // The units on the device at once; those on the host unit by unit on the pipeline's thread,
  // in forward order: the next forward starts as soon as its first unit is updated (gather /
  // refresh wait per unit), and each unit's copy up overlaps the host's work on the next.
  pipeline_->wait_all();
  device_step(lr);
  for (auto& u : units_) u.refreshed = u.train.empty() || !u.host;
  pipeline_->start(head_ + 1, [this, lr, scale = grad_scale_, step = steps_](int64_t unit) {
    auto& u = units_[unit];
    if (u.train.empty() || !u.host) return;
    host_update(u, lr, scale, step);
    stage_up(unit);
  });
}

void ZeroImpl::device_step(double lr) {
  std::vector<at::Tensor> grads = grad_shards(false);
  if (grads.empty()) return;
  // Offloaded runs defer the unscale and clip factors to the steps (the host's does it in its pass).
  if (offload_ && grad_scale_ != 1.0) at::_foreach_mul_(grads, grad_scale_);
  for (const bool decays : {true, false})
    for (const double scale : loraplus_ > 0 ? std::vector<double>{1.0, loraplus_} : std::vector<double>{1.0}) {
      std::vector<at::Tensor> p, g, m, v;
      for (auto& u : units_)
        for (auto& piece : u.pieces)
          if (!u.host && piece.decays == decays && (loraplus_ <= 0 || (piece.lr_scale != 1.0) == (scale != 1.0))) {
            p.push_back(piece.master);
            g.push_back(piece.grad);
            m.push_back(piece.exp_avg);
            v.push_back(piece.exp_avg_sq);
          }
      if (!p.empty()) optim::adamw_update(p, g, m, v, steps_, lr * scale, decays ? weight_decay_ : 0.0, adam_);
    }
  if (opt_.stage == 3) return;  // the next forward gathers from the new master shards
  // Stages 1, 2: every rank's new parameters into every rank's full copy.
  for (auto& u : units_)
    if (!u.train.empty() && !u.host) start_gather(u.train, comm_, u.master.to(opt_.compute_dtype));
  for (auto& u : units_)
    if (u.train.gather) {
      u.train.gather->wait();
      u.train.gather.reset();
      u.train.gather_input = at::Tensor();
    }
}

void ZeroImpl::zero_grad() {
  c10::NoGradGuard no_grad;
  grad_scale_ = 1.0;
  device_sq_norm_ = at::Tensor();
  device_norm_valid_ = use_device_norm_;
  for (auto& u : units_) {
    if (u.train.empty()) continue;
    if (u.host) {  // the next step's first gradient is copied in, not added: no pass over host memory
      u.grad_fresh = true;
      continue;
    }
    u.grad_shard.zero_();
    if (opt_.stage == 1) u.grad_flat.zero_();
  }
}

// ---- state

std::vector<std::string> ZeroImpl::save_optimizer_state(const std::filesystem::path& dir) {
  if (pipeline_) pipeline_->wait_all();
  if (steps_ == 0) return {};  // no update yet: no state
  std::vector<std::pair<std::string, at::Tensor>> state;
  for (const auto& u : units_)
    for (const auto& piece : u.pieces) {
      state.emplace_back(ckpt::moment_key(piece.name, "exp_avg", piece.begin, piece.end, false), piece.exp_avg);
      state.emplace_back(ckpt::moment_key(piece.name, "exp_avg_sq", piece.begin, piece.end, false), piece.exp_avg_sq);
    }
  const auto file = ckpt::optimizer_rank_file(rank());
  model::save_tensor_file(dir / file, state);
  return {file};
}

void ZeroImpl::load_optimizer_state(const std::filesystem::path& dir, int64_t steps) {
  if (pipeline_) pipeline_->wait_all();
  const ckpt::OptimizerStateReader reader(dir);
  if (reader.empty()) return;
  for (auto& u : units_)
    for (auto& piece : u.pieces) {
      reader.read(piece.name, "exp_avg", piece.begin, piece.end, piece.exp_avg);
      reader.read(piece.name, "exp_avg_sq", piece.begin, piece.end, piece.exp_avg_sq);
    }
  steps_ = steps;
}

at::Tensor ZeroImpl::full_parameter(const std::string& name) {
  if (pipeline_) pipeline_->wait_all();
  for (int64_t unit = 0; unit <= head_; ++unit) {
    auto& u = units_[unit];
    for (const auto& fp : u.train.params) {
      if (fp.name != name) continue;
      // One rank holds it all (offloaded: straight from host memory, no device round trip).
      if (world() == 1) return u.master.narrow(0, fp.offset, fp.numel).view(fp.shape);
      if (cached_unit_ != unit) {  // one gather of the unit's fp32 masters serves its parameters
        cached_values_ = at::empty({u.train.padded}, u.master.options().device(device_));
        comm_.all_gather(cached_values_, u.master.to(device_))->wait();
        cached_unit_ = unit;
      }
      if (rank() != 0) return {};
      return cached_values_.narrow(0, fp.offset, fp.numel).view(fp.shape);
    }
  }
  LF_THROW(ConfigError, "ZeRO: no trainable parameter named {}", name);
}

void ZeroImpl::load_full_parameter(const std::string& name, const at::Tensor& value) {
  if (pipeline_) pipeline_->wait_all();
  c10::NoGradGuard no_grad;
  for (auto& u : units_)
    for (const auto& fp : u.train.params) {
      if (fp.name != name) continue;
      LF_CHECK(value.numel() == fp.numel, ConfigError, "resume: {} has {} elements in the checkpoint, {} in the model",
               name, value.numel(), fp.numel);
      const auto flat = value.to(device(), at::kFloat).reshape({-1});
      const int64_t lo = u.train.shard_begin();
      const int64_t b = std::max(lo, fp.offset), e = std::min(lo + u.train.shard, fp.offset + fp.numel);
      if (b < e) u.master.narrow(0, b - lo, e - b).copy_(flat.narrow(0, b - fp.offset, e - b));
      if (opt_.stage < 3) fp.slot->detach().copy_(flat.view(fp.shape));
      if (b < e && u.dev_shard.defined()) u.dev_shard.narrow(0, b - lo, e - b).copy_(flat.narrow(0, b - fp.offset, e - b));
      return;
    }
  LF_THROW(ConfigError, "resume: the checkpoint's {} is not a trainable parameter of this run", name);
}

ZeroMemory ZeroImpl::resident_bytes() const {
  ZeroMemory m;
  m.params = replicated_frozen_bytes_;
  for (const auto& u : units_) {
    if (!u.train.empty()) {
      if (u.train.resident && opt_.stage < 3) m.params += static_cast<int64_t>(u.train.flat.nbytes());
      m.master += static_cast<int64_t>(u.master.nbytes());
      m.moments += static_cast<int64_t>(u.exp_avg.nbytes() + u.exp_avg_sq.nbytes());
      m.grads += static_cast<int64_t>(u.grad_shard.nbytes());
      if (opt_.stage == 1) m.grads += static_cast<int64_t>(u.grad_flat.nbytes());
    }
    if (u.frozen_shard.defined()) m.params += static_cast<int64_t>(u.frozen_shard.nbytes());
    if (u.host && !u.train.empty()) {
      m.host += static_cast<int64_t>(u.master.nbytes() + u.exp_avg.nbytes() + u.exp_avg_sq.nbytes() + u.grad_shard.nbytes());
      if (u.dev_shard.defined()) m.params += static_cast<int64_t>(u.dev_shard.nbytes());
    }
    const int64_t unit_bytes = (u.train.padded + u.frozen.padded) * static_cast<int64_t>(c10::elementSize(opt_.compute_dtype));
    m.largest_unit = std::max(m.largest_unit, unit_bytes);
  }
  return m;
}

ZeroMemory ZeroImpl::predicted_bytes() const {
  // DeepSpeed's formula (Rajbhandari et al.), lf-train's dtypes: c bytes per compute-dtype
  // parameter, fp32 gradients, fp32 master, two fp32 moments; the trainable count T, the
  // frozen F, over N ranks.
  const double n = static_cast<double>(world()), t = static_cast<double>(trainable_numel_);
  const double c = static_cast<double>(c10::elementSize(opt_.compute_dtype));
  ZeroMemory m;
  m.params = opt_.stage < 3 ? static_cast<int64_t>(c * t) + replicated_frozen_bytes_
                            : static_cast<int64_t>(c * static_cast<double>(frozen_numel_) / n);
  m.grads = static_cast<int64_t>(4 * t / n + (opt_.stage == 1 ? 4 * t : 0));
  m.master = static_cast<int64_t>(4 * t / n);
  m.moments = static_cast<int64_t>(8 * t / n);
  for (const auto& u : units_)
    m.largest_unit = std::max<int64_t>(
        m.largest_unit, static_cast<int64_t>(c * static_cast<double>(u.train.numel + u.frozen.numel)));
  if (offload_) {
    // 16 bytes a parameter of the host's units over N in host memory (offload_ratio's share);
    // on the device, unless the parameters are offloaded too, their compute-dtype shard (stage
    // 3's gather input, stage 2's refresh).
    double th = 0;
    for (const auto& u : units_)
      if (u.host) th += static_cast<double>(u.train.numel);
    m.host = static_cast<int64_t>(16 * th / n);
    m.params += opt_.offload == Offload::kParams ? 0 : static_cast<int64_t>(c * th / n);
  }
  return m;
}

std::vector<ZeroEvent> ZeroImpl::events() const {
  std::lock_guard lock(events_mu_);
  return events_;
}

}  // namespace

std::unique_ptr<ZeroStrategy> make_zero_strategy(StrategySetup setup, const ZeroOptions& options) {
  LF_CHECK(setup.communicator != nullptr, ConfigError, "ZeRO needs the job's communicator (world {})", setup.world);
  return std::make_unique<ZeroImpl>(setup, options);
}

}  // namespace lf::parallel
