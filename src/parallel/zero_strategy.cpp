// ZeRO-1/2/3 (zero_strategy.h): builds the units (zero_units.h, unit_storage.h), resolves once what
// each buffer does (zero_roles.h), and answers the strategy's calls through its three roles
// (zero_unit_table.h): unit gathering and prefetch, gradient reduction, the sharded optimizer step.
#include "lf/parallel/zero_strategy.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <set>

#include "lf/common/error.h"
#include "lf/common/log.h"
#include "lf/model/causal_lm.h"
#include "lf/model/lora.h"
#include "lf/plan/zero_bytes.h"
#include "host_sums.h"
#include "zero_gather.h"
#include "zero_optimizer.h"
#include "zero_reduce.h"

namespace lf::parallel {

namespace {

// The model's parameters by unit: the trainable ones, and the frozen ones (kept apart whether
// sharded or left replicated). A trainable parameter from outside the model (the value head of stage rm,
// model/value_head.h) joins the unit it names, and that unit's trainable parameters are gathered in fp32:
// the head computes from its fp32 weights, as TRL's does, where a compute-dtype copy would round them (the
// model's own parameters there compute from their fp32 copy cast down: the same bits as the usual copy).
struct UnitParamLists {
  std::vector<std::vector<model::NamedParam>> train, frozen;
  std::vector<bool> fp32;  // a unit whose trainable parameters are gathered in fp32
  int64_t trainable = 0, frozen_numel = 0, frozen_bytes = 0;
};

UnitParamLists params_by_unit(const StrategySetup& s, int64_t head) {
  auto all = s.model->named_parameters();
  for (auto& p : model::lora_parameters(*s.model)) all.push_back(p);
  std::set<std::string> of_model;
  for (const auto& p : all) of_model.insert(p.name);
  UnitParamLists out;
  out.train.resize(head + 1);
  out.frozen.resize(head + 1);
  out.fp32.assign(head + 1, false);
  std::set<std::string> trainable, beside;  // beside: a head beside the model (no LoRA question, gathered in fp32)
  for (const auto& p : s.trainable) {
    trainable.insert(p.name);
    if (!of_model.count(p.name)) {
      beside.insert(p.name);
      all.push_back(p);
      continue;
    }
    LF_CHECK(!s.lora || p.name.find(".lora_") != std::string::npos || p.name.find(".oft_R.") != std::string::npos,
             ConfigError, "ZeRO with modules trained fully beside LoRA (additional_target: {}) is not supported yet; use "
             "zero_stage 0 (data parallel)", p.name);
  }
  for (auto& p : all) {
    const int64_t u = p.unit;  // the model's layout's (CausalLM::named_parameters, lora_parameters), the head's
    LF_CHECK(u >= 0 && u <= head, ConfigError, "parameter {} has no unit of the model (got {})", p.name, u);
    if (beside.count(p.name)) out.fp32[u] = true;
    if (trainable.count(p.name)) {
      out.train[u].push_back(p);
      out.trainable += p.tensor->numel();
    } else {
      out.frozen[u].push_back(p);
      out.frozen_numel += p.tensor->numel();
      out.frozen_bytes += static_cast<int64_t>(p.tensor->nbytes());
    }
  }
  LF_CHECK(out.trainable > 0, ConfigError, "the model has no trainable parameters");
  return out;
}

class ZeroImpl final : public ZeroStrategy {
 public:
  ZeroImpl(const StrategySetup& s, const ZeroOptions& o);
  ~ZeroImpl() override;

  std::string describe() const override;
  model::UnitHooks* unit_hooks() override { return z_.roles.needs_unit_hooks() ? gather_.get() : nullptr; }
  // Stage 3 gathers in the forward; offload's stage 2 gathers each unit's updated shard there.
  bool needs_every_forward() const override { return z_.roles.needs_unit_hooks(); }
  void before_micro_step(bool last) override;
  void after_backward() override;
  std::vector<double> all_reduce_sums(std::vector<double> values) override {
    return sum_over_ranks(z_.comm, std::move(values), z_.device);
  }
  at::Tensor all_gather_bytes(const at::Tensor& mine) override;
  bool unscale_gradients(double scale) override { return optimizer_->unscale(scale); }
  double clip_grad_norm(double max_norm) override { return optimizer_->clip(max_norm); }
  void optimizer_step(double lr) override;
  void zero_grad() override;
  int64_t optimizer_steps() const override { return optimizer_->steps(); }
  int64_t num_trainable() const override { return trainable_numel_; }
  std::vector<std::string> save_optimizer_state(const std::filesystem::path& dir) override {
    wait_host_step();
    return optimizer_->save(dir, rank());
  }
  void load_optimizer_state(const std::filesystem::path& dir, int64_t steps) override {
    wait_host_step();
    optimizer_->load(dir, steps);
  }
  at::Tensor full_parameter(const std::string& name) override;
  bool saving_is_collective() const override { return true; }
  void load_full_parameter(const std::string& name, const at::Tensor& value) override;
  ZeroMemory resident_bytes() const override;
  ZeroMemory predicted_bytes() const override;
  std::vector<ZeroEvent> events() const override { return z_.events.all(); }

 private:
  void build_unit(int64_t index, const std::vector<model::NamedParam>& train, std::vector<model::NamedParam> frozen,
                  at::ScalarType train_dtype);
  std::vector<bool> host_units(const std::vector<std::vector<model::NamedParam>>& train) const;
  void end_micro_step();
  void wait_host_step() {
    if (z_.pipeline) z_.pipeline->wait_all();
  }

  ZeroContext z_;  // first: the roles hold it
  ZeroOptions opt_;
  std::unique_ptr<ShardedOptimizer> optimizer_;
  std::unique_ptr<UnitGather> gather_;
  std::unique_ptr<GradReduction> reduction_;
  int64_t trainable_numel_ = 0, replicated_frozen_bytes_ = 0;
  int64_t frozen_element_bytes_ = 0;
  // The micro-step in progress (between before_micro_step and the next one / after_backward).
  bool open_ = false, syncing_ = false;
  // Saving: the last unit whose full fp32 values were gathered.
  int64_t cached_unit_ = -1;
  at::Tensor cached_values_;
};

ZeroImpl::ZeroImpl(const StrategySetup& s, const ZeroOptions& o)
    : ZeroStrategy(s.rank, s.world),
      z_(resolve_zero_roles(o, s.world), *s.communicator, s.trainable.front().tensor->device()),
      opt_(o) {
  z_.tied = s.model->config().tie_word_embeddings;
  z_.head = s.model->head_unit();
  auto lists = params_by_unit(s, z_.head);
  trainable_numel_ = lists.trainable;
  if (!z_.roles.frozen_sharded) replicated_frozen_bytes_ = lists.frozen_bytes;
  frozen_element_bytes_ = lists.frozen_numel > 0 ? lists.frozen_bytes / lists.frozen_numel : 0;
  optimizer_ = std::make_unique<ShardedOptimizer>(z_, s, o);
  gather_ = std::make_unique<UnitGather>(z_);
  reduction_ = std::make_unique<GradReduction>(z_);
  z_.units.resize(z_.head + 1);
  const auto host = host_units(lists.train);
  int64_t largest_gathered = 0, largest_trainable = 0;
  for (int64_t u = 0; u <= z_.head; ++u) {
    z_.units[u].role = unit_role(z_.roles, host[u]);
    build_unit(u, lists.train[u], z_.roles.frozen_sharded ? std::move(lists.frozen[u]) : std::vector<model::NamedParam>{},
               lists.fp32[u] ? at::kFloat : z_.roles.compute_dtype);
    const auto& unit = z_.units[u];
    largest_gathered = std::max(largest_gathered, unit.params.train.gathered_bytes() +
                                                      (unit.params.frozen ? unit.params.frozen->gathered_bytes() : 0));
    largest_trainable = std::max(largest_trainable, unit.params.train.padded);
  }
  resolve_comm_depths(z_.roles, o, largest_gathered, largest_trainable, z_.head + 1);
  if (z_.roles.offloaded()) {
    z_.copies = std::make_unique<OffloadCopies>(z_.device, z_.head + 1, z_.roles.copy_streams);
    z_.pipeline = std::make_unique<HostStepPipeline>();
  }
}

// offload_ratio: which units' state goes to the host (plan::offload_host_units: whole units from
// the head down while they fit, so that the host memory checked at start bounds what is pinned).
std::vector<bool> ZeroImpl::host_units(const std::vector<std::vector<model::NamedParam>>& train) const {
  if (!z_.roles.offloaded()) return std::vector<bool>(train.size(), false);
  std::vector<int64_t> numel(train.size(), 0);
  int64_t smallest = 0;
  for (size_t u = 0; u < train.size(); ++u) {
    for (const auto& p : train[u]) numel[u] += p.tensor->numel();
    if (numel[u] > 0 && (smallest == 0 || numel[u] < smallest)) smallest = numel[u];
  }
  auto host = plan::offload_host_units(numel, opt_.offload_ratio);
  LF_CHECK(std::find(host.begin(), host.end(), true) != host.end(), ConfigError,
           "offload_ratio {} offloads nothing: the smallest unit with trainable parameters holds {:.4f} of them (units "
           "go to the host whole); raise offload_ratio to at least that, or use offload: none",
           opt_.offload_ratio, static_cast<double>(smallest) / static_cast<double>(trainable_numel_));
  return host;
}

ZeroImpl::~ZeroImpl() {
  // Offload: no copy may still read or write host or device memory that the members free
  // (an exception can unwind mid-step, with copies and the host step in flight).
  if (z_.roles.offloaded()) {
    try {
      wait_host_step();
      if (z_.device.is_cuda()) c10::impl::getDeviceGuardImpl(z_.device.type())->synchronizeDevice(z_.device.index());
    } catch (...) {  // the step's own error is already on its way
    }
  }
  z_.pipeline.reset();  // its thread stops before the optimizer its jobs call goes
}

void ZeroImpl::build_unit(int64_t index, const std::vector<model::NamedParam>& train,
                          std::vector<model::NamedParam> frozen, at::ScalarType train_dtype) {
  c10::NoGradGuard no_grad;
  ZeroUnit& u = z_.units[index];
  if (!train.empty()) {
    // Rank 0's values everywhere (as DDP broadcasts), in fp32: the master weights.
    int64_t numel = 0;
    for (const auto& p : train) numel += p.tensor->numel();
    const int64_t padded = (numel + world() - 1) / world() * world();
    auto values = flat_fp32_values(train, padded);
    z_.comm.broadcast(values, 0)->wait();
    u.params.train = make_flat_group(train, train_dtype, rank(), world(), /*trainable=*/true);
    u.params.train.flat.copy_(values);
    optimizer_->add_unit(u, values);
    // Stage 1: the full gradient sums the step's micro-steps, so it lives as long as the unit.
    if (!z_.roles.grads_sharded)
      u.grads.flat = at::zeros({padded}, at::TensorOptions().dtype(at::kFloat).device(z_.device));
    reduction_->route(index);
    if (z_.roles.params_gathered_on_use) release_storage(u.params.train);
  }
  if (!frozen.empty()) u.params.frozen = make_unit_storage(std::move(frozen), rank(), world());
}

std::string ZeroImpl::describe() const {
  const auto p = predicted_bytes();
  const double gib = 1 << 30;
  const auto& r = z_.roles;
  const int64_t host_count =
      std::count_if(z_.units.begin(), z_.units.end(), [](const ZeroUnit& u) { return u.role.host; });
  const char* pinned = !r.pin_memory            ? "pageable (pin_memory false)"
                       : z_.device.is_cuda()     ? "page-locked"
                                                 : "page-locked on a GPU run (pin_memory)";
  const std::string offload =
      r.offloaded()
          ? fmt::format(" ({:.3f} GiB of it in host memory, {}: {}{})", p.host / gib, pinned,
                        r.params_on_host() ? "parameters and optimizer offloaded" : "optimizer offloaded",
                        opt_.offload_ratio < 1 ? fmt::format(", {} of {} units (offload_ratio {})", host_count,
                                                             z_.units.size(), opt_.offload_ratio)
                                               : std::string())
          : std::string();
  return fmt::format(
      "ZeRO-{}: rank {} of {} ({} backend, {} units); predicted bytes per rank: parameters {:.3f} GiB, gradients "
      "{:.3f} GiB, master weights {:.3f} GiB, optimizer moments {:.3f} GiB = {:.3f} GiB{}{}; {}",
      r.stage, rank(), world(), z_.comm.backend(), z_.units.size(), p.params / gib, p.grads / gib, p.master / gib,
      p.moments / gib, p.total() / gib, offload,
      r.params_gathered_on_use ? fmt::format(", + {:.3f} GiB per gathered unit (at most {} at a time)",
                                             p.largest_unit / gib, 1 + r.prefetch_units)
                               : std::string(),
      describe_comm(r));
}

void ZeroImpl::end_micro_step() {
  reduction_->finish();
  if (z_.roles.params_gathered_on_use) gather_->release_all();
}

void ZeroImpl::before_micro_step(bool last) {
  if (open_) end_micro_step();
  else z_.events.clear();  // one step's events (kept for the whole job they would grow without bound)
  cached_unit_ = -1;
  cached_values_ = at::Tensor();
  open_ = true;
  syncing_ = last;
  reduction_->begin(last);
}

void ZeroImpl::after_backward() {
  LF_CHECK(open_ && syncing_, BackendError, "ZeRO: after_backward() without before_micro_step(true)");
  end_micro_step();
  open_ = false;
}

at::Tensor ZeroImpl::all_gather_bytes(const at::Tensor& mine) {
  auto in = mine.to(z_.device);
  auto out = at::empty({z_.comm.world_size() * in.numel()}, in.options());
  z_.comm.all_gather(out, in)->wait();
  return out.view({z_.comm.world_size(), in.numel()}).cpu();
}

// Offloaded, the units on the device step at once and those on the host unit by unit on the
// pipeline's thread, in forward order.
void ZeroImpl::optimizer_step(double lr) {
  c10::NoGradGuard no_grad;
  optimizer_->step_device(lr);
  if (z_.roles.gathers_after_step()) gather_->gather_updated();  // stage 3: the next forward gathers
  if (!z_.roles.offloaded()) return;
  gather_->mark_stale();
  optimizer_->start_host_step(lr);
}

void ZeroImpl::zero_grad() {
  optimizer_->zero_grad();
  c10::NoGradGuard no_grad;
  if (!z_.roles.grads_sharded)
    for (auto& u : z_.units)
      if (u.trains()) u.grads.flat.zero_();
}

at::Tensor ZeroImpl::full_parameter(const std::string& name) {
  wait_host_step();
  for (int64_t unit = 0; unit <= z_.head; ++unit) {
    auto& u = z_.units[unit];
    for (const auto& fp : u.params.train.params) {
      if (fp.name != name) continue;
      const auto& master = u.state.master;
      // One rank holds it all (offloaded: straight from host memory, no device round trip).
      if (world() == 1) return master.narrow(0, fp.offset, fp.numel).view(fp.shape);
      if (cached_unit_ != unit) {  // one gather of the unit's fp32 masters serves its parameters
        cached_values_ = at::empty({u.params.train.padded}, master.options().device(z_.device));
        z_.comm.all_gather(cached_values_, master.to(z_.device))->wait();
        cached_unit_ = unit;
      }
      if (rank() != 0) return {};
      return cached_values_.narrow(0, fp.offset, fp.numel).view(fp.shape);
    }
  }
  LF_THROW(ConfigError, "ZeRO: no trainable parameter named {}", name);
}

void ZeroImpl::load_full_parameter(const std::string& name, const at::Tensor& value) {
  wait_host_step();
  c10::NoGradGuard no_grad;
  for (auto& u : z_.units)
    for (const auto& fp : u.params.train.params) {
      if (fp.name != name) continue;
      LF_CHECK(value.numel() == fp.numel, ConfigError, "resume: {} has {} elements in the checkpoint, {} in the model",
               name, value.numel(), fp.numel);
      const auto flat = value.to(z_.device, at::kFloat).reshape({-1});
      const auto& g = u.params.train;
      const int64_t lo = g.shard_begin();
      const int64_t b = std::max(lo, fp.offset), e = std::min(lo + g.shard, fp.offset + fp.numel);
      auto& s = u.state;
      if (b < e) s.master.narrow(0, b - lo, e - b).copy_(flat.narrow(0, b - fp.offset, e - b));
      if (!z_.roles.params_gathered_on_use) fp.slot->detach().copy_(flat.view(fp.shape));
      if (b < e && s.device_shard.defined())
        s.device_shard.narrow(0, b - lo, e - b).copy_(flat.narrow(0, b - fp.offset, e - b));
      return;
    }
  LF_THROW(ConfigError, "resume: the checkpoint's {} is not a trainable parameter of this run", name);
}

ZeroMemory ZeroImpl::resident_bytes() const {
  ZeroMemory m;
  m.params = replicated_frozen_bytes_;
  for (const auto& u : z_.units) {
    const auto& s = u.state;
    if (u.trains()) {
      if (u.params.train.resident && !z_.roles.params_gathered_on_use)
        m.params += static_cast<int64_t>(u.params.train.flat.nbytes());
      m.master += static_cast<int64_t>(s.master.nbytes());
      m.moments += static_cast<int64_t>(s.exp_avg.nbytes() + s.exp_avg_sq.nbytes());
      m.grads += static_cast<int64_t>(s.grad_shard.nbytes());
      if (!z_.roles.grads_sharded) m.grads += static_cast<int64_t>(u.grads.flat.nbytes());
    }
    if (u.params.frozen) m.params += u.params.frozen->shard_bytes();
    if (u.role.host && u.trains()) {
      const auto host = static_cast<int64_t>(s.master.nbytes() + s.exp_avg.nbytes() + s.exp_avg_sq.nbytes() +
                                             s.grad_shard.nbytes());
      m.host += host;
      if (!s.pinned.empty() && s.pinned.front().pinned()) m.pinned += host;
      if (s.device_shard.defined()) m.params += static_cast<int64_t>(s.device_shard.nbytes());
    }
    const int64_t unit_bytes = u.params.train.gathered_bytes() + (u.params.frozen ? u.params.frozen->gathered_bytes() : 0);
    m.largest_unit = std::max(m.largest_unit, unit_bytes);
  }
  return m;
}

// DeepSpeed's formula from the units built (plan::zero_state_bytes, the memory model's).
ZeroMemory ZeroImpl::predicted_bytes() const {
  std::vector<plan::ZeroUnitCount> counts;
  for (const auto& u : z_.units)
    counts.push_back({u.params.train.numel, u.params.frozen ? u.params.frozen->numel() : 0, u.role.host});
  plan::ZeroLayout layout;
  layout.stage = z_.roles.stage;
  layout.world = world();
  layout.compute_bytes = static_cast<int64_t>(c10::elementSize(z_.roles.compute_dtype));
  layout.frozen_bytes = frozen_element_bytes_ > 0 ? frozen_element_bytes_ : layout.compute_bytes;
  layout.offload = z_.roles.params_on_host() ? "params" : z_.roles.offloaded() ? "optimizer" : "none";
  auto b = plan::zero_state_bytes(counts, layout);
  ZeroMemory m;
  // Stages 1, 2 leave the frozen parameters whole: their bytes as held.
  m.params = static_cast<int64_t>(b.params) + (z_.roles.frozen_sharded ? 0 : replicated_frozen_bytes_);
  m.grads = static_cast<int64_t>(b.grads);
  m.master = static_cast<int64_t>(b.master);
  m.moments = static_cast<int64_t>(b.moments);
  m.largest_unit = static_cast<int64_t>(b.largest_unit);
  m.host = static_cast<int64_t>(b.host);
  return m;
}

}  // namespace

std::unique_ptr<ZeroStrategy> make_zero_strategy(StrategySetup setup, const ZeroOptions& options) {
  LF_CHECK(setup.communicator != nullptr, ConfigError, "ZeRO needs the job's communicator (world {})", setup.world);
  return std::make_unique<ZeroImpl>(setup, options);
}

}  // namespace lf::parallel
