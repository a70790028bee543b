#include "zero_gather.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <deque>

namespace lf::parallel {

namespace {

// Waits for the group's gather in flight (and, `up`, makes the calling stream wait for what the
// offload's up stream queued for it), then drops it.
void finish_gather(FlatGroup& g, OffloadCopies* up, int64_t unit) {
  g.gather->wait();
  if (up) up->wait_up(unit);  // a gather queued on the up stream
  g.gather.reset();
  g.gather_input = at::Tensor();
}

}  // namespace

// Offloaded, a unit's trainable parameters are gathered on the up stream, behind their copy up:
// from the device shard the host step's thread refreshed (optimizer offloaded), or (parameters
// offloaded) from the fp32 master copied up now and cast on the device, as FSDP2's offload does
// (no compute-dtype copy in host memory). A prefetch so overlaps the compute of the unit before
// instead of holding the compute stream; gather(wait) makes the compute stream wait for it.
void UnitGather::start_gather_from_host(int64_t unit) {
  auto& u = z_.units[unit];
  allocate_storage(u.params.train);  // on the compute stream: its block is the model's
  z_.copies->on_up(
      unit,
      [&] {
        const auto& s = u.state;
        start_gather(u.params.train, z_.comm,
                     s.device_shard.defined()
                         ? s.device_shard
                         : s.master.to(z_.device, /*non_blocking=*/true).to(u.params.train.dtype()));
      },
      /*after_caller=*/true);
}

void UnitGather::gather_trainable(ZeroUnit& u, int64_t unit, bool wait) {
  auto& g = u.params.train;
  if (g.empty()) return;
  if (!g.resident && !g.gather) {
    z_.log("gather_start", unit);
    if (u.role.local_gather) {  // one rank: the fp32 master cast straight into the storage, one pass
      allocate_storage(g);
      c10::NoGradGuard no_grad;
      storage_alias(g).copy_(u.state.master);
      z_.log("gather_done", unit);
      return;
    }
    if (u.role.host) start_gather_from_host(unit);
    else start_gather(g, z_.comm, u.state.master.to(g.dtype()));
  }
  if (wait && g.gather) {
    finish_gather(g, u.role.host ? z_.copies.get() : nullptr, unit);
    z_.log("gather_done", unit);
  }
}

bool UnitGather::gather(int64_t unit, bool wait) {
  auto& u = z_.units[unit];
  const auto& train = u.params.train;
  if (u.role.host && !train.empty() && !train.resident && !train.gather) {
    // Its host step first (the pipeline runs units in forward order); a prefetch never waits.
    if (!wait && !z_.pipeline->unit_done(unit)) return false;
    z_.pipeline->wait_unit(unit);
  }
  gather_trainable(u, unit, wait);
  if (!u.params.frozen) return true;
  for (auto& t : u.params.frozen->tensors()) {
    auto& g = t.group;
    if (g.empty()) continue;
    if (!g.resident && !g.gather) {
      z_.log("gather_start", unit);
      start_gather(g, z_.comm, t.shard);
    }
    if (wait && g.gather) {
      finish_gather(g, nullptr, unit);
      z_.log("gather_done", unit);
    }
  }
  return true;
}

void UnitGather::release(int64_t unit) {
  auto& u = z_.units[unit];
  auto free = [&](FlatGroup& g, bool up) {
    if (g.gather) finish_gather(g, up ? z_.copies.get() : nullptr, unit);  // never free what a collective writes
    if (g.resident && !g.empty()) {
      release_storage(g);
      z_.log("release", unit);
    }
  };
  free(u.params.train, u.role.host);
  if (u.params.frozen)
    for (auto& t : u.params.frozen->tensors()) free(t.group, false);
}

void UnitGather::release_all() {
  for (int64_t unit = 0; unit <= z_.head; ++unit) release(unit);
}

// The units from `from` towards `last` (step +1 or -1), up to prefetch_units of them, stopping at
// the first that cannot be issued yet.
void UnitGather::prefetch(int64_t from, int64_t step, int64_t last) {
  for (int64_t k = 0, v = from; k < z_.roles.prefetch_units; ++k, v += step) {
    if (step > 0 ? v > last : v < last) return;
    if (!gather(v, false)) return;
  }
}

void UnitGather::refresh(int64_t unit) {
  auto& u = z_.units[unit];
  if (u.params.refreshed || !u.trains()) return;
  z_.pipeline->wait_unit(unit);
  z_.copies->wait_up(unit);
  start_gather(u.params.train, z_.comm, u.state.device_shard);
  finish_gather(u.params.train, nullptr, unit);
  u.params.refreshed = true;
}

void UnitGather::mark_stale() {
  for (auto& u : z_.units) u.params.refreshed = !u.trains() || !u.role.host;
}

void UnitGather::gather_updated() {
  c10::NoGradGuard no_grad;
  std::deque<int64_t> in_flight;
  auto finish_oldest = [&] {
    finish_gather(z_.units[in_flight.front()].params.train, nullptr, in_flight.front());
    z_.log("update_gather_done", in_flight.front());
    in_flight.pop_front();
  };
  for (int64_t unit = 0; unit <= z_.head; ++unit) {
    auto& u = z_.units[unit];
    if (!u.trains() || u.role.host) continue;  // a host unit's comes up after its host step (refresh)
    z_.log("update_gather_start", unit);
    start_gather(u.params.train, z_.comm, u.state.master.to(u.params.train.dtype()));
    in_flight.push_back(unit);
    while (static_cast<int64_t>(in_flight.size()) > z_.roles.update_gathers_in_flight) finish_oldest();
  }
  while (!in_flight.empty()) finish_oldest();
}

// ---- the hooks

void UnitGather::before_forward(int64_t unit, bool recompute) {
  if (!z_.roles.params_gathered_on_use) {  // offload's stage 2: the parameters stay; this step's values come up
    refresh(unit);
    if (unit == z_.head && z_.tied) refresh(0);
    return;
  }
  gather(unit, true);
  if (unit == z_.head && z_.tied) gather(0, true);  // the tied lm_head is the embedding
  prefetch(unit + 1, +1, z_.head);
  z_.log("forward_begin", unit);
}

void UnitGather::after_forward(int64_t unit, bool recompute) {
  z_.log("forward_end", unit);
  if (!z_.roles.params_gathered_on_use) return;
  if (recompute) return;                  // its backward runs next, on these parameters
  if (unit == 0 && z_.tied) return;       // the head's loss uses it; released with the head
  release(unit);
  if (unit == z_.head && z_.tied) release(0);
}

void UnitGather::before_backward(int64_t unit) {
  z_.log("backward_begin", unit);
  if (!z_.roles.params_gathered_on_use) return;
  // The embedding's backward reads no weight (its rows go to the sink); the others' do.
  if (unit == 0) return;
  gather(unit, true);
  prefetch(unit - 1, -1, 1);
}

void UnitGather::after_backward(int64_t unit) {
  z_.log("backward_end", unit);
  if (!z_.roles.params_gathered_on_use) return;
  release(unit);
}

}  // namespace lf::parallel
