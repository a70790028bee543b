#include "zero_reduce.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "lf/common/error.h"

namespace lf::parallel {

GradReduction::~GradReduction() {
  for (const auto& t : routed_) model::set_grad_route(t, nullptr);
}

void GradReduction::route(int64_t unit) {
  const auto& params = z_.units[unit].params.train.params;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& slot = *params[i].slot;
    where_[slot.unsafeGetTensorImpl()] = {unit, i};
    model::set_grad_route(slot, this);
    routed_.push_back(slot);
  }
}

const GradReduction::Where& GradReduction::where(const at::Tensor& param) const {
  const auto it = where_.find(param.unsafeGetTensorImpl());
  LF_CHECK(it != where_.end(), BackendError, "ZeRO: a gradient for a parameter it does not hold");
  return it->second;
}

at::Tensor& GradReduction::grad_flat(ZeroUnit& u) {
  auto& flat = u.grads.flat;
  // direct_grads: backward adds straight into the shard (no buffer to zero, no pass to add it in).
  if (!flat.defined() && u.role.direct_grads) flat = u.state.grad_shard;
  // Else on the device, offloaded or not: backward's gradients land here.
  if (!flat.defined())
    flat = at::zeros({u.params.train.padded}, at::TensorOptions().dtype(at::kFloat).device(z_.device));
  return flat;
}

bool GradReduction::expect(const at::Tensor& param) {
  ++z_.units[where(param).unit].grads.outstanding;
  return true;
}

void GradReduction::take(const at::Tensor& param, const at::Tensor& grad) {
  const auto& w = where(param);
  auto& u = z_.units[w.unit];
  const auto& fp = u.params.train.params[w.param];
  LF_CHECK(!u.grads.launched, BackendError, "ZeRO: a gradient of {} arrived after unit {}'s reduction was issued",
           fp.name, w.unit);
  c10::NoGradGuard no_grad;
  grad_flat(u).narrow(0, fp.offset, fp.numel).view(fp.shape).add_(grad);
  arrived(w.unit);
}

void GradReduction::take_rows(const at::Tensor& param, const at::Tensor& ids, const at::Tensor& rows) {
  const auto& w = where(param);
  auto& u = z_.units[w.unit];
  const auto& fp = u.params.train.params[w.param];
  c10::NoGradGuard no_grad;
  grad_flat(u).narrow(0, fp.offset, fp.numel).view(fp.shape).index_add_(0, ids, rows.to(at::kFloat));
  arrived(w.unit);
}

void GradReduction::arrived(int64_t unit) {
  auto& g = z_.units[unit].grads;
  g.had_grad = true;
  if (--g.outstanding == 0) launch_ready();
}

// Units go from the head down (the order backward completes them), each once its gradients are all in.
void GradReduction::launch_ready() {
  if (!z_.roles.reduces_every_micro_step() && !syncing_) return;
  while (next_to_launch_ >= 0) {
    auto& u = z_.units[next_to_launch_];
    if (u.trains()) {
      if (!(u.grads.had_grad && u.grads.outstanding == 0)) return;
      launch(next_to_launch_);
    }
    --next_to_launch_;
  }
}

void GradReduction::launch(int64_t unit) {
  auto& u = z_.units[unit];
  z_.log("reduce_start", unit);
  u.grads.launched = true;
  auto& flat = grad_flat(u);
  if (!z_.roles.grads_sharded) {
    u.grads.reduce = z_.comm.reduce_scatter(u.state.grad_shard, flat);  // the step's sum, into the shard
  } else if (z_.world() == 1) {
    u.grads.reduced = flat;  // the one shard is the whole: nothing to reduce
  } else {
    u.grads.reduced = at::empty({u.params.train.shard}, at::TensorOptions().dtype(at::kFloat).device(z_.device));
    u.grads.reduce = z_.comm.reduce_scatter(u.grads.reduced, flat);
  }
  pending_.push_back(unit);
  // Each pending unit keeps its full gradient: past the limit the oldest is waited for.
  while (static_cast<int64_t>(pending_.size()) > z_.roles.reductions_in_flight) {
    retire(pending_.front());
    pending_.pop_front();
  }
}

// A host unit's reduced shard: its share of the norm while it is still on the device, then device
// -> host on the down stream (backward goes on meanwhile; the host reads it after the micro-step's
// synchronisation in finish). Later micro-steps of an accumulating step add into host memory.
void GradReduction::send_down(ZeroUnit& u) {
  auto& norm = z_.norm;
  auto& reduced = u.grads.reduced;
  if (!u.state.grad_fresh) {
    norm.valid = false;  // the step's gradient is a sum over micro-steps: the host's norm
    u.state.grad_shard.add_(reduced.to(at::kCPU));
    return;
  }
  if (norm.valid && !syncing_) norm.valid = false;  // micro-steps to come: the host's norm
  if (norm.valid) {
    const auto sq = at::linalg_vector_norm(reduced, 2).to(at::kDouble).square();
    norm.sq = norm.sq.defined() ? norm.sq + sq : sq;
  }
  z_.copies->copy_down(u.state.grad_shard, reduced);
  u.state.grad_fresh = false;
}

void GradReduction::retire(int64_t unit) {
  auto& u = z_.units[unit];
  if (u.grads.reduce) u.grads.reduce->wait();
  u.grads.reduce.reset();
  z_.log("reduce_done", unit);
  if (!z_.roles.grads_sharded) return;  // reduced into the shard; the full sum stays for the next step
  c10::NoGradGuard no_grad;
  if (u.role.direct_grads) {
    // backward added into grad_shard itself
  } else if (!u.role.host) {
    u.state.grad_shard.add_(u.grads.reduced);
  } else {
    send_down(u);
  }
  u.grads.reduced = at::Tensor();
  u.grads.flat = at::Tensor();
}

void GradReduction::finish() {
  z_.log("backward_returned", -1);
  if (z_.roles.reduces_every_micro_step() || syncing_) {
    for (; next_to_launch_ >= 0; --next_to_launch_)
      if (z_.units[next_to_launch_].trains()) launch(next_to_launch_);
    for (const int64_t unit : pending_) retire(unit);
    pending_.clear();
    // Offload: the gradients' copies to the host are done before the host reads them.
    if (z_.roles.offloaded() && z_.device.is_cuda())
      c10::impl::getDeviceGuardImpl(z_.device.type())->synchronizeDevice(z_.device.index());
  }
  for (auto& u : z_.units) {
    u.grads.outstanding = 0;
    u.grads.had_grad = u.grads.launched = false;
  }
  next_to_launch_ = z_.head;
}

}  // namespace lf::parallel
