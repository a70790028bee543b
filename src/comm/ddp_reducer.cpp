#include "lf/comm/ddp_reducer.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/core/GradMode.h>

#include <mutex>
#include <unordered_map>

#include "lf/common/error.h"
#include "lf/common/log.h"

namespace lf::comm {

using Clock = std::chrono::steady_clock;

struct DdpReducer::State {
  struct Slot {
    int64_t bucket = 0;
    int64_t offset = 0;  // elements into the bucket
    at::Tensor view;     // the parameter's shape over its part of the bucket
    bool arrived = false;
    // External (model::GradSink, through the owner): the bucket itself accumulates this
    // parameter's gradient over the step's micro-steps; .grad stays empty until finish.
    bool external = false;
    bool has_data = false;  // external: the bucket part holds this step's sum so far
    int64_t uses = 0;       // external: uses in this micro-step's graph whose gradient is still due
    // Sparse (an embedding whose lookup hands its rows to the sink): the lookups' ids and
    // gradient rows of this step, exchanged and added after the dense part's all-reduce.
    bool sparse = false;
    std::vector<at::Tensor> row_ids, rows;
    bool rows_only = false;  // sparse with no dense part: not in a bucket
    at::Tensor own;          // rows_only: its gradient
  };
  // One sparse parameter's exchange of this step: every rank's ids and rows.
  struct RowExchange {
    int64_t param = 0;
    at::Tensor ids, rows;
    WorkPtr ids_work, rows_work;
  };
  struct Bucket {
    at::Tensor buffer;  // [numel] reduce dtype
    std::vector<int64_t> params;
    int64_t pending = 0;
    WorkPtr work;
  };

  Communicator& comm;
  DdpOptions opt;
  std::vector<at::Tensor> params;
  std::vector<Slot> slots;
  std::vector<Bucket> buckets;
  std::unordered_map<const c10::TensorImpl*, int64_t> index_of;
  bool syncing = false;
  bool step_open = false;
  bool reported_external = false;
  int64_t micro_steps = 0;             // prepare_backward calls of the open step (equal on every rank)
  bool order_settled = false;          // the buckets follow the gradients' arrival order (after step 1)
  std::vector<int64_t> arrival;        // step 1's arrival order
  std::vector<int64_t> rebuild_order;  // rank 0's arrival order, to rebuild the buckets at the next step
  std::vector<RowExchange> exchanges;  // between a step's first prepare_backward and its finish_backward
  int64_t next_to_launch = 0;
  int64_t collectives = 0;
  mutable std::mutex mu;  // hooks (autograd thread) vs the training thread
  std::vector<DdpEvent> events;

  State(Communicator& c, std::vector<at::Tensor> p, DdpOptions o) : comm(c), opt(o), params(std::move(p)) {}

  void log(const char* what, int64_t bucket) { events.push_back({what, bucket, Clock::now()}); }

  // Parameters in `order` (the order their gradients are expected), first bucket capped at
  // first_bucket_mb, the rest at bucket_cap_mb.
  void build_buckets(const std::vector<int64_t>& order) {
    slots.resize(params.size());
    for (auto& slot : slots) slot.view = at::Tensor();  // the old buffers go before the new ones come
    buckets.clear();
    const int64_t elem = at::elementSize(opt.reduce_dtype);
    auto cap_bytes = [&](size_t index) {
      return static_cast<int64_t>((index == 0 ? opt.first_bucket_mb : opt.bucket_cap_mb) * (1 << 20));
    };
    std::vector<std::vector<int64_t>> groups(1);
    int64_t bytes = 0;
    for (const int64_t i : order) {
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
        slots[p].bucket = static_cast<int64_t>(g);
        slots[p].offset = numel;
        numel += params[p].numel();
      }
      bucket.buffer = at::zeros({numel}, params[groups[g][0]].options().dtype(opt.reduce_dtype));
      bucket.params = groups[g];
      for (int64_t p : groups[g])  // made once: a hook's view would cost two tensor allocations a call
        slots[p].view = bucket.buffer.narrow(0, slots[p].offset, params[p].numel()).view(params[p].sizes());
      buckets.push_back(std::move(bucket));
    }
  }

  // Parameter indices bucket by bucket, in the order buckets are sent.
  std::vector<int64_t> bucket_order() const {
    std::vector<int64_t> order;
    for (const auto& b : buckets) order.insert(order.end(), b.params.begin(), b.params.end());
    return order;
  }

  at::Tensor& slot_view(int64_t p) { return slots[p].view; }

  at::Tensor& own_grad(int64_t p) {
    if (!slots[p].own.defined()) slots[p].own = at::zeros_like(params[p]);
    return slots[p].own;
  }

  // The first prepare_backward of an optimizer step.
  void open_step() {
    c10::NoGradGuard no_grad;
    if (!rebuild_order.empty()) {
      // A gradient still in an old bucket (no zero_grad) keeps its values in storage of its own.
      for (auto& param : params)
        for (const auto& b : buckets)
          if (param.grad().defined() && param.grad().is_alias_of(b.buffer)) param.mutable_grad() = param.grad().clone();
      build_buckets(rebuild_order);
      rebuild_order.clear();
      spdlog::info("DDP: {} buckets rebuilt in the order the gradients arrived", buckets.size());
    }
    micro_steps = 0;
    events.clear();  // the log holds one step: kept for the whole job it would grow without bound
    for (size_t p = 0; p < params.size(); ++p) {
      Slot& slot = slots[p];
      const at::Tensor& g = params[p].grad();
      if (slot.external || slot.rows_only) {
        // This step's sum is kept here, not in .grad: a gradient left in .grad (no zero_grad
        // since the last step) is where it starts, as autograd would accumulate it.
        slot.has_data = g.defined();
        if (!g.defined()) continue;
        at::Tensor& sum = slot.rows_only ? own_grad(static_cast<int64_t>(p)) : slot.view;
        if (g.data_ptr() != sum.data_ptr()) sum.copy_(g);
        params[p].mutable_grad() = at::Tensor();
        continue;
      }
      const bool in_bucket = g.defined() && g.data_ptr() == slot.view.data_ptr();
      if (in_bucket) {
        // finish_backward left .grad as a view of the bucket and zero_grad did not release
        // it: the hooks would overwrite it (and add it twice): give it storage of its own.
        params[p].mutable_grad() = g.clone();
      }
    }
    step_open = true;
  }

  // The final micro-step's gradient of param p has arrived (grad = this micro-step's part).
  void on_grad(int64_t p, const at::Tensor& grad) {
    RECORD_USER_SCOPE("lf::ddp_hook");
    if (!grad.defined()) return;  // a use whose gradient went to the sink instead
    std::lock_guard lock(mu);
    LF_CHECK(!slots[p].rows_only, BackendError,
             "DDP: parameter {} was declared rows-only (an untied embedding) but got a dense gradient", p);
    LF_CHECK(!slots[p].external, BackendError,
             "DDP: parameter {} reached autograd's .grad although its gradients go into the bucket (a use that "
             "bypassed cast_for_compute)", p);
    if (!syncing || slots[p].arrived) return;
    c10::NoGradGuard no_grad;
    const at::Tensor& accumulated = params[p].grad();
    at::Tensor& view = slot_view(p);
    if (accumulated.defined()) at::add_out(view, accumulated, grad);  // one pass, no temporary
    else view.copy_(grad);
    mark_arrived(p);
  }

  void on_rows(int64_t p, const at::Tensor& ids, const at::Tensor& rows) {
    RECORD_USER_SCOPE("lf::ddp_rows");
    std::lock_guard lock(mu);
    slots[p].row_ids.push_back(ids);
    slots[p].rows.push_back(rows);
  }

  // finish_backward, after every bucket is launched: each sparse parameter's ids and rows
  // from every rank, padded to the same size everywhere (a bound known to all ranks: id 0
  // with a zero row adds nothing).
  void exchange_rows() {
    c10::NoGradGuard no_grad;
    for (size_t p = 0; p < slots.size(); ++p) {
      Slot& slot = slots[p];
      if (!slot.sparse) continue;
      const auto& param = params[p];
      const int64_t total = micro_steps * opt.sparse_rows_bound;
      auto ids = at::zeros({total}, param.options().dtype(at::kLong));
      auto rows = at::zeros({total, param.size(1)}, param.options().dtype(opt.sparse_rows_dtype));
      int64_t n = 0;
      for (size_t k = 0; k < slot.row_ids.size(); ++k) {
        const int64_t m = slot.row_ids[k].numel();
        LF_CHECK(n + m <= total, BackendError,
                 "DDP: {} embedding rows in {} micro-step(s), more than the bound of {} per micro-step (lookup "
                 "{} of {})", n + m, micro_steps, opt.sparse_rows_bound, k + 1, slot.row_ids.size());
        ids.narrow(0, n, m).copy_(slot.row_ids[k]);
        rows.narrow(0, n, m).copy_(slot.rows[k]);
        n += m;
      }
      slot.row_ids.clear();
      slot.rows.clear();
      RowExchange x;
      x.param = static_cast<int64_t>(p);
      x.ids = at::empty({total * comm.world_size()}, ids.options());
      x.rows = at::empty({total * comm.world_size(), param.size(1)}, rows.options());
      x.ids_work = comm.all_gather(x.ids, ids);
      x.rows_work = comm.all_gather(x.rows, rows);
      ++collectives;
      exchanges.push_back(std::move(x));
    }
  }

  // After the parameter's bucket is reduced: every rank's rows into its gradient `into`, in
  // the same order on every rank and in every run. On CPU, index_put_(accumulate) runs its
  // duplicate ids on several threads with atomic adds (nondeterministic fp32 sums: two
  // identical runs with OMP_NUM_THREADS > 1 gave different weights); index_add_ adds them in
  // index order. On CUDA it is the other way round (index_add_ uses atomics; index_put_ sorts).
  void add_rows(int64_t p, at::Tensor& into) {
    for (auto& x : exchanges) {
      if (x.param != p) continue;
      x.ids_work->wait();
      x.rows_work->wait();
      if (into.is_cuda()) into.index_put_({x.ids}, x.rows.to(into.scalar_type()), /*accumulate=*/true);
      else into.index_add_(0, x.ids, x.rows.to(into.scalar_type()));
    }
  }

  int64_t external_index(const at::Tensor& param) const {
    const auto it = index_of.find(param.unsafeGetTensorImpl());
    return it == index_of.end() ? -1 : it->second;
  }

  // One use's gradient of an external parameter, converted into the bucket.
  void on_external_grad(int64_t p, const at::Tensor& grad) {
    RECORD_USER_SCOPE("lf::ddp_take");
    std::lock_guard lock(mu);
    Slot& slot = slots[p];
    LF_CHECK(!(syncing && slot.arrived), BackendError, "DDP: a gradient of parameter {} arrived after its bucket was sent",
             p);
    c10::NoGradGuard no_grad;
    auto& view = slot.view;
    if (slot.has_data) view.add_(grad);
    else view.copy_(grad);
    slot.has_data = true;
    if (slot.uses > 0) --slot.uses;
    if (syncing && slot.uses == 0) mark_arrived(p);
  }

  void mark_arrived(int64_t p) {
    slots[p].arrived = true;
    if (!order_settled) arrival.push_back(p);
    --buckets[slots[p].bucket].pending;
    launch_ready();
  }

  // In index order only, so every rank issues the same collectives in the same order.
  void launch_ready() {
    while (next_to_launch < static_cast<int64_t>(buckets.size()) && buckets[next_to_launch].pending == 0) {
      Bucket& b = buckets[next_to_launch];
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
  auto& slots = state_->slots;
  slots.resize(state_->params.size());
  for (size_t p = 0; p < state_->params.size(); ++p)
    state_->index_of[state_->params[p].unsafeGetTensorImpl()] = static_cast<int64_t>(p);
  for (const int64_t p : options.row_params) {
    const auto& param = state_->params.at(static_cast<size_t>(p));
    if (options.sparse_rows_bound > 0 && param.dim() == 2 && options.reduce_dtype == param.scalar_type())
      slots[p].sparse = true;
  }
  for (const int64_t p : options.rows_only_params) slots.at(static_cast<size_t>(p)).rows_only = slots[p].sparse;
  // Gradients arrive roughly last layer first; step 1 tells (rebuild).
  std::vector<int64_t> reverse;
  for (int64_t i = static_cast<int64_t>(slots.size()) - 1; i >= 0; --i)
    if (!slots[i].rows_only) reverse.push_back(i);
  state_->build_buckets(reverse);
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

bool DdpReducer::expect_external(const at::Tensor& param) {
  const int64_t p = state_->external_index(param);
  if (p < 0 || state_->slots[p].rows_only ||
      state_->buckets[state_->slots[p].bucket].buffer.scalar_type() != param.scalar_type())
    return false;
  std::lock_guard lock(state_->mu);
  auto& slot = state_->slots[p];
  slot.external = true;
  ++slot.uses;
  return true;
}

void DdpReducer::take_external(const at::Tensor& param, const at::Tensor& grad) {
  const int64_t p = state_->external_index(param);
  LF_CHECK(p >= 0, BackendError, "DDP: a gradient for a parameter it does not reduce");
  state_->on_external_grad(p, grad);
}

bool DdpReducer::expect_rows(const at::Tensor& param) {
  const int64_t p = state_->external_index(param);
  auto& s = *state_;
  return p >= 0 && s.slots[p].sparse;
}

void DdpReducer::take_rows(const at::Tensor& param, const at::Tensor& ids, const at::Tensor& grad_rows) {
  const int64_t p = state_->external_index(param);
  LF_CHECK(p >= 0, BackendError, "DDP: embedding rows for a parameter it does not reduce");
  state_->on_rows(p, ids, grad_rows);
}

void DdpReducer::prepare_backward(bool sync) {
  std::lock_guard lock(state_->mu);
  auto& s = *state_;
  if (!s.step_open) s.open_step();
  ++s.micro_steps;
  for (auto& slot : s.slots) {
    slot.uses = 0;  // this micro-step's forward counts them again
    if (sync) slot.arrived = false;
  }
  s.syncing = sync;
  if (!sync) return;
  s.next_to_launch = 0;
  for (auto& b : s.buckets) {
    b.pending = static_cast<int64_t>(b.params.size());
    b.work.reset();
  }
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
      auto& slot = s.slots[p];
      if (slot.arrived || slot.rows_only) continue;
      const at::Tensor& g = s.params[p].grad();
      if (slot.external) {
        if (!slot.has_data) slot.view.zero_();  // an external part holds its sum already
      } else if (g.defined()) {
        slot.view.copy_(g);
      } else {
        slot.view.zero_();
      }
      s.mark_arrived(static_cast<int64_t>(p));
    }
    s.syncing = false;
    s.step_open = false;
    s.exchange_rows();
  }
  c10::NoGradGuard no_grad;
  for (int64_t b = 0; b < static_cast<int64_t>(s.buckets.size()); ++b) {
    s.buckets[b].work->wait();
    for (int64_t p : s.buckets[b].params) {
      if (s.slots[p].sparse) s.add_rows(p, s.slot_view(p));
      auto& param = s.params[p];
      const auto& reduced = s.slot_view(p);
      // Same dtype: the gradient becomes the bucket's slice itself (no copy after the last
      // all-reduce, on the step's critical path); else converted into the parameter's dtype.
      if (reduced.scalar_type() == param.scalar_type()) param.mutable_grad() = reduced;
      else if (param.grad().defined()) param.mutable_grad().copy_(reduced);
      else param.mutable_grad() = reduced.to(param.dtype());
    }
  }
  for (size_t p = 0; p < s.params.size(); ++p) {  // rows-only: zeros plus every rank's rows
    auto& slot = s.slots[p];
    if (!slot.rows_only) continue;
    auto& g = s.own_grad(static_cast<int64_t>(p));
    if (!slot.has_data) g.zero_();
    slot.has_data = false;
    s.add_rows(static_cast<int64_t>(p), g);
    s.params[p].mutable_grad() = g;
  }
  s.exchanges.clear();
  if (!s.order_settled) settle_bucket_order();
  std::lock_guard lock(s.mu);
  s.log("done", -1);
  if (!s.reported_external) {  // once: whether the gradients of cast weights skip .grad
    s.reported_external = true;
    int64_t external = 0, sparse = 0, rows_only = 0;
    for (const auto& slot : s.slots) {
      external += slot.external ? 1 : 0;
      sparse += slot.sparse ? 1 : 0;
      rows_only += slot.rows_only ? 1 : 0;
    }
    spdlog::info("DDP: {} of {} parameters accumulate straight into the buckets; {} embedding(s) exchange their "
                 "lookup gradient as rows (at most {} per micro-step), {} of them rows only (no all-reduce)",
                 external, s.params.size(), sparse, s.opt.sparse_rows_bound, rows_only);
  }
}

void DdpReducer::settle_bucket_order() {
  // Every rank takes rank 0's order (the same collective sequence everywhere); rebuilt at
  // the next step's first prepare_backward, once the optimizer is done with these buckets.
  auto& s = *state_;
  s.order_settled = true;
  int64_t n = 0;  // the parameters in buckets
  for (const auto& slot : s.slots) n += slot.rows_only ? 0 : 1;
  auto order = at::tensor(s.arrival, at::TensorOptions(at::kLong)).to(s.params[0].device());
  LF_CHECK(order.numel() == n, BackendError, "DDP: {} of {} gradients arrived in the first step", order.numel(), n);
  s.comm.broadcast(order, 0)->wait();
  order = order.cpu();
  std::vector<int64_t> agreed(order.data_ptr<int64_t>(), order.data_ptr<int64_t>() + n);
  std::vector<bool> seen(s.params.size(), false);
  for (const int64_t p : agreed) {
    LF_CHECK(p >= 0 && p < static_cast<int64_t>(s.params.size()) && !seen[static_cast<size_t>(p)] &&
                 !s.slots[static_cast<size_t>(p)].rows_only,
             BackendError,
             "DDP: rank 0's gradient order is not an order of this rank's {} parameters (do the ranks train the "
             "same model and trainable set?)", n);
    seen[static_cast<size_t>(p)] = true;
  }
  if (agreed != s.bucket_order()) s.rebuild_order = std::move(agreed);
  s.arrival.clear();
}

std::vector<int64_t> DdpReducer::bucket_order() const {
  std::lock_guard lock(state_->mu);
  return state_->bucket_order();
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

}  // namespace lf::comm
