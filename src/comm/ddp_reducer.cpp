#include "lf/comm/ddp_reducer.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/core/GradMode.h>

#include <mutex>

#include "lf/common/error.h"

namespace lf::comm {

using Clock = std::chrono::steady_clock;

struct DdpReducer::State {
  struct Slot {
    int64_t bucket = 0;
    int64_t offset = 0;  // elements into the bucket
    bool arrived = false;
  };
  struct Bucket {
    at::Tensor buffer;  // [numel] reduce dtype
    std::vector<int64_t> params;
    int64_t pending = 0;
    bool launched = false;
    WorkPtr work;
  };

  Communicator& comm;
  DdpOptions opt;
  std::vector<at::Tensor> params;
  std::vector<Slot> slots;
  std::vector<Bucket> buckets;
  bool syncing = false;
  bool grads_in_buckets = false;  // .grad tensors are views of the buckets (after finish_backward)
  int64_t next_to_launch = 0;
  int64_t collectives = 0;
  mutable std::mutex mu;  // hooks (autograd thread) vs the training thread
  std::vector<DdpEvent> events;

  State(Communicator& c, std::vector<at::Tensor> p, DdpOptions o) : comm(c), opt(o), params(std::move(p)) {}

  void log(const char* what, int64_t bucket) { events.push_back({what, bucket, Clock::now()}); }

  // Reverse model order, first bucket capped at first_bucket_mb, the rest at bucket_cap_mb.
  void build_buckets() {
    slots.resize(params.size());
    const int64_t elem = at::elementSize(opt.reduce_dtype);
    auto cap_bytes = [&](size_t index) {
      return static_cast<int64_t>((index == 0 ? opt.first_bucket_mb : opt.bucket_cap_mb) * (1 << 20));
    };
    std::vector<std::vector<int64_t>> groups(1);
    int64_t bytes = 0;
    for (int64_t i = static_cast<int64_t>(params.size()) - 1; i >= 0; --i) {
      int64_t b = params[i].numel() * elem;
      if (!groups.back().empty() && bytes + b > cap_bytes(groups.size() - 1)) {
        groups.emplace_back();
        bytes = 0;
      }
      groups.back().push_back(i);
      bytes += b;
    }
    for (size_t g = 0; g < groups.size(); ++g) {
      Bucket bucket;
      int64_t numel = 0;
      for (int64_t p : groups[g]) {
        slots[p] = {static_cast<int64_t>(g), numel, false};
        numel += params[p].numel();
      }
      bucket.buffer = at::zeros({numel}, params[groups[g][0]].options().dtype(opt.reduce_dtype));
      bucket.params = groups[g];
      buckets.push_back(std::move(bucket));
    }
  }

  at::Tensor slot_view(int64_t p) {
    const Slot& s = slots[p];
    return buckets[s.bucket].buffer.narrow(0, s.offset, params[p].numel()).view(params[p].sizes());
  }

  // The final micro-step's gradient of param p has arrived (grad = this micro-step's part).
  void on_grad(int64_t p, const at::Tensor& grad) {
    RECORD_USER_SCOPE("lf::ddp_hook");
    std::lock_guard lock(mu);
    if (!syncing || slots[p].arrived) return;
    c10::NoGradGuard no_grad;
    const at::Tensor& accumulated = params[p].grad();
    auto view = slot_view(p);
    if (accumulated.defined()) at::add_out(view, accumulated, grad);  // one pass, no temporary
    else view.copy_(grad);
    mark_arrived(p);
  }

  void mark_arrived(int64_t p) {
    slots[p].arrived = true;
    --buckets[slots[p].bucket].pending;
    launch_ready();
  }

  // In index order only, so every rank issues the same collectives in the same order.
  void launch_ready() {
    while (next_to_launch < static_cast<int64_t>(buckets.size()) && buckets[next_to_launch].pending == 0) {
      Bucket& b = buckets[next_to_launch];
      b.launched = true;
      log("launch", next_to_launch);
      b.work = comm.all_reduce(b.buffer, ReduceOp::kSum);
      ++collectives;
      ++next_to_launch;
    }
  }
};

DdpReducer::DdpReducer(Communicator& comm, std::vector<at::Tensor> params, DdpOptions options)
    : state_(std::make_shared<State>(comm, std::move(params), options)) {
  for (const auto& p : state_->params)
    LF_CHECK(p.requires_grad() && p.is_leaf(), ConfigError, "DDP: every parameter must be a trainable leaf tensor");
  state_->build_buckets();
  std::weak_ptr<State> weak = state_;
  for (size_t i = 0; i < state_->params.size(); ++i) {
    // A tensor hook runs when this parameter's gradient for the current backward is computed,
    // just before it is accumulated into .grad.
    state_->params[i].register_hook([weak, i](const at::Tensor& grad) {
      if (auto s = weak.lock()) s->on_grad(static_cast<int64_t>(i), grad);
    });
  }
}

DdpReducer::~DdpReducer() = default;

void DdpReducer::broadcast_parameters(int root) {
  c10::NoGradGuard no_grad;
  for (auto& p : state_->params) {
    auto flat = p.detach().contiguous();
    state_->comm.broadcast(flat, root)->wait();
    if (!flat.is_same(p)) p.detach().copy_(flat);
  }
}

void DdpReducer::prepare_backward(bool sync) {
  std::lock_guard lock(state_->mu);
  auto& s = *state_;
  // finish_backward left .grad as views of the buckets; the optimizer's zero_grad released
  // them. One still there would be overwritten by the hooks (and accumulated into twice):
  // give it storage of its own.
  if (s.grads_in_buckets) {
    c10::NoGradGuard no_grad;
    for (size_t p = 0; p < s.params.size(); ++p) {
      const at::Tensor& g = s.params[p].grad();
      if (g.defined() && g.data_ptr() == s.slot_view(static_cast<int64_t>(p)).data_ptr())
        s.params[p].mutable_grad() = g.clone();
    }
    s.grads_in_buckets = false;
  }
  s.syncing = sync;
  if (!sync) return;
  s.next_to_launch = 0;
  for (auto& b : s.buckets) {
    b.pending = static_cast<int64_t>(b.params.size());
    b.launched = false;
    b.work.reset();
  }
  for (auto& slot : s.slots) slot.arrived = false;
}

void DdpReducer::finish_backward() {
  auto& s = *state_;
  {
    std::lock_guard lock(s.mu);
    LF_CHECK(s.syncing, ConfigError, "DDP: finish_backward() without prepare_backward(true)");
    s.log("backward_end", -1);
    // Parameters that got no gradient on this rank contribute what they hold (or zeros).
    c10::NoGradGuard no_grad;
    for (size_t p = 0; p < s.params.size(); ++p) {
      if (s.slots[p].arrived) continue;
      const at::Tensor& g = s.params[p].grad();
      auto view = s.slot_view(static_cast<int64_t>(p));
      if (g.defined()) view.copy_(g);
      else view.zero_();
      s.mark_arrived(static_cast<int64_t>(p));
    }
    s.syncing = false;
  }
  c10::NoGradGuard no_grad;
  for (int64_t b = 0; b < static_cast<int64_t>(s.buckets.size()); ++b) {
    s.buckets[b].work->wait();
    for (int64_t p : s.buckets[b].params) {
      auto& param = s.params[p];
      auto reduced = s.slot_view(p);
      // Same dtype: the gradient becomes the bucket's slice itself (no copy after the last
      // all-reduce, on the step's critical path); else converted into the parameter's dtype.
      if (reduced.scalar_type() == param.scalar_type()) param.mutable_grad() = reduced;
      else if (param.grad().defined()) param.mutable_grad().copy_(reduced);
      else param.mutable_grad() = reduced.to(param.dtype());
    }
  }
  s.grads_in_buckets = true;
  std::lock_guard lock(s.mu);
  s.log("done", -1);
}

int64_t DdpReducer::num_buckets() const { return static_cast<int64_t>(state_->buckets.size()); }

int64_t DdpReducer::collectives_issued() const {
  std::lock_guard lock(state_->mu);
  return state_->collectives;
}

std::vector<DdpEvent> DdpReducer::events() const {
  std::lock_guard lock(state_->mu);
  return state_->events;
}

void DdpReducer::clear_events() {
  std::lock_guard lock(state_->mu);
  state_->events.clear();
}

}  // namespace lf::comm
