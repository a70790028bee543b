// The CPU backend: ring collectives over a TCP mesh, run in issue order on one
// background thread per communicator, so communication overlaps the caller's
// compute (the DDP overlap contract holds on CPU too). Documented as the
// test / GPU-less backend; the production engine is NCCL. Each collective first
// swaps a small header with its ring neighbours (which collective, how many bytes,
// its sequence number): ranks that issue different collectives fail with an error
// naming both, instead of reading each other's bytes as data.
#include <ATen/ATen.h>
#include <fmt/format.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "lf/comm/communicator.h"
#include "all_to_all_layout.h"
#include "lf/common/error.h"
#include "comm_store.h"
#include "lf/rendezvous/store_client.h"
#include "tcp_mesh.h"

namespace lf::comm {

namespace {

class CpuWork : public Work {
 public:
  void wait() override {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    if (error_) std::rethrow_exception(error_);
  }
  bool is_done() const override {
    std::lock_guard lock(mu_);
    return done_;
  }
  void finish(std::exception_ptr error) {
    {
      std::lock_guard lock(mu_);
      done_ = true;
      error_ = error;
    }
    cv_.notify_all();
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

// What a rank is about to do, swapped with its neighbours before every collective.
struct CollectiveHeader {
  uint32_t kind = 0;    // CollectiveKind
  uint32_t dtype = 0;   // c10::ScalarType
  uint64_t seq = 0;     // this communicator's collective count
  uint64_t numel = 0;   // elements of the full tensor
  bool operator==(const CollectiveHeader&) const = default;
};

enum CollectiveKind : uint32_t { kAllReduce = 1, kBroadcast, kAllGather, kReduceScatter, kAllToAll };

const char* kind_name(uint32_t k) {
  switch (k) {
    case kAllReduce: return "all_reduce";
    case kBroadcast: return "broadcast";
    case kAllGather: return "all_gather";
    case kReduceScatter: return "reduce_scatter";
    case kAllToAll: return "all_to_all (row elements)";
  }
  return "?";
}

std::string describe(const CollectiveHeader& h) {
  return fmt::format("collective #{} {} of {} x {}", h.seq, kind_name(h.kind), h.numel,
                     c10::toString(static_cast<c10::ScalarType>(h.dtype)));
}

// [begin, end) element range of chunk i of n elements split world ways.
std::pair<int64_t, int64_t> chunk_range(int64_t n, int world, int i) {
  return {n * i / world, n * (i + 1) / world};
}

class CpuCommunicator : public Communicator {
 public:
  explicit CpuCommunicator(const CommOptions& o)
      : opt_(o), store_(connect_store(o)),
        mesh_(store_, o.key_prefix, o.rank, o.world_size,
              std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000))),
        thread_([this] { run(); }) {}

  // Queued collectives are failed, not run, and a running one is cut short: destruction while
  // collectives are pending happens when the caller gives up (an error unwinding the trainer),
  // and running them would wait out one timeout each.
  ~CpuCommunicator() override {
    bool cut = false;
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      cut = running_ || !queue_.empty();
    }
    if (cut) mesh_.shutdown();
    cv_.notify_all();
    thread_.join();
  }

  int rank() const override { return opt_.rank; }
  int world_size() const override { return opt_.world_size; }
  const char* backend() const override { return "cpu-tcp"; }

  WorkPtr all_reduce(at::Tensor t, ReduceOp op) override {
    check_input(t, "all_reduce");
    return enqueue([this, t, op]() mutable {
      agree_with_ring(kAllReduce, t);
      auto flat = t.view({-1});
      ring_reduce_scatter(flat, op == ReduceOp::kMax);
      ring_all_gather(flat);
      if (op == ReduceOp::kAvg) flat.div_(opt_.world_size);
    });
  }

  WorkPtr broadcast(at::Tensor t, int root) override {
    check_input(t, "broadcast");
    return enqueue([this, t, root] {
      const auto mine = header(kBroadcast, t);
      size_t bytes = t.nbytes();
      if (opt_.rank == root) {
        for (int r = 0; r < opt_.world_size; ++r)
          if (r != root) mesh_.send(r, &mine, sizeof mine);
        for (int r = 0; r < opt_.world_size; ++r)
          if (r != root) mesh_.send(r, t.data_ptr(), bytes);
      } else {
        CollectiveHeader theirs;
        mesh_.recv(root, &theirs, sizeof theirs);
        check_same(mine, theirs, root);
        mesh_.recv(root, t.data_ptr(), bytes);
      }
    });
  }

  WorkPtr all_gather(at::Tensor output, at::Tensor input) override {
    check_sharded("all_gather", input, output);
    return enqueue([this, output, input] {
      agree_with_ring(kAllGather, output);
      auto flat = output.view({-1});
      int64_t n = input.numel();
      flat.narrow(0, n * opt_.rank, n).copy_(input.view({-1}));
      ring_all_gather(flat);
    });
  }

  WorkPtr reduce_scatter(at::Tensor output, at::Tensor input) override {
    check_sharded("reduce_scatter", output, input);
    return enqueue([this, output, input] {
      agree_with_ring(kReduceScatter, input);
      auto flat = input.view({-1}).clone();
      ring_reduce_scatter(flat, false);
      int64_t n = output.numel();
      output.view({-1}).copy_(flat.narrow(0, n * opt_.rank, n));
    });
  }

  WorkPtr all_to_all(at::Tensor output, at::Tensor input, std::vector<int64_t> output_splits,
                     std::vector<int64_t> input_splits) override {
    check_input(output, "all_to_all");
    check_input(input, "all_to_all");
    auto layout = all_to_all_layout(output, input, output_splits, input_splits, opt_.world_size);
    return enqueue([this, output, input, layout] {
      // The header's count is a row's elements (equal on every rank; the row counts differ).
      const int64_t width = layout.row_bytes / static_cast<int64_t>(input.element_size());
      agree_with_ring(CollectiveHeader{kAllToAll, static_cast<uint32_t>(input.scalar_type()), seq_++,
                                       static_cast<uint64_t>(width)});
      pairwise_exchange(static_cast<char*>(output.data_ptr()), static_cast<const char*>(input.data_ptr()), layout);
    });
  }

  void barrier() override {
    auto t = at::zeros({1}, at::kFloat);
    all_reduce(t, ReduceOp::kSum)->wait();
  }

  void abort() override {
    {
      std::lock_guard lock(mu_);
      aborted_ = true;
    }
    mesh_.shutdown();
    cv_.notify_all();
  }

 private:
  using Op = std::pair<std::function<void()>, std::shared_ptr<CpuWork>>;

  void check_input(const at::Tensor& t, const char* what) const {
    LF_CHECK(t.device().is_cpu() && t.is_contiguous(), BackendError,
             "{}: the CPU backend needs contiguous CPU tensors (got {} on {})", what,
             t.is_contiguous() ? "contiguous" : "non-contiguous", t.device().str());
  }

  // `whole` holds world x shard.numel() elements: all_gather's output, reduce_scatter's input.
  void check_sharded(const char* what, const at::Tensor& shard, const at::Tensor& whole) const {
    check_input(shard, what);
    check_input(whole, what);
    LF_CHECK(whole.numel() == shard.numel() * opt_.world_size, BackendError,
             "{}: the full tensor has {} elements, expected world {} x shard {}", what, whole.numel(),
             opt_.world_size, shard.numel());
  }

  WorkPtr enqueue(std::function<void()> fn) {
    auto work = std::make_shared<CpuWork>();
    {
      std::lock_guard lock(mu_);
      if (aborted_) {
        work->finish(std::make_exception_ptr(BackendError("communicator aborted")));
        return work;
      }
      queue_.emplace_back(std::move(fn), work);
    }
    cv_.notify_all();
    return work;
  }

  // The first failed collective fails every later one without running it (the ring's state
  // is unknown after a partial transfer) and closes the mesh, so the peers blocked on this
  // rank fail now too: the first timeout ends the job, not one timeout per queued collective.
  void run() {
    for (;;) {
      Op op;
      bool aborted = false, stopping = false;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || aborted_ || !queue_.empty(); });
        if (queue_.empty()) return;
        op = std::move(queue_.front());
        queue_.pop_front();
        aborted = aborted_;
        stopping = stopping_;
        running_ = !aborted && !failed_ && !stopping;
      }
      std::exception_ptr error;
      if (aborted) {
        error = std::make_exception_ptr(BackendError("communicator aborted"));
      } else if (failed_) {
        error = not_run_after(failed_);
      } else if (stopping) {
        error = std::make_exception_ptr(BackendError("communicator destroyed before this collective ran"));
      } else {
        try {
          op.first();
        } catch (...) {
          error = std::current_exception();
          failed_ = error;
          mesh_.shutdown();
        }
      }
      {
        std::lock_guard lock(mu_);
        running_ = false;
      }
      op.second->finish(error);
    }
  }

  // The error of a collective skipped after `first` failed: the same exit code (a timeout
  // stays a timeout), saying it never ran.
  std::exception_ptr not_run_after(const std::exception_ptr& first) const {
    const auto why = [&](const char* what) {
      return fmt::format("rank {}: collective not run: an earlier collective failed: {}", opt_.rank, what);
    };
    try {
      std::rethrow_exception(first);
    } catch (const TimeoutError& e) {
      return std::make_exception_ptr(TimeoutError(why(e.what())));
    } catch (const Error& e) {
      return std::make_exception_ptr(Error(why(e.what()), e.exit_code()));
    } catch (const std::exception& e) {
      return std::make_exception_ptr(BackendError(why(e.what())));
    }
  }

  // On the communicator's thread, in issue order: the next collective's header.
  CollectiveHeader header(CollectiveKind kind, const at::Tensor& t) {
    return {kind, static_cast<uint32_t>(t.scalar_type()), seq_++, static_cast<uint64_t>(t.numel())};
  }

  void check_same(const CollectiveHeader& mine, const CollectiveHeader& theirs, int peer) const {
    LF_CHECK(mine == theirs, BackendError,
             "rank {}: the ranks issued different collectives: this rank's {}, rank {}'s {} (every rank must "
             "issue the same collectives in the same order)",
             opt_.rank, describe(mine), peer, describe(theirs));
  }

  // Ring collectives: send this rank's header right, check the left neighbour's; around
  // the ring every rank is compared with every other.
  void agree_with_ring(CollectiveKind kind, const at::Tensor& whole) { agree_with_ring(header(kind, whole)); }
  void agree_with_ring(const CollectiveHeader& mine) {
    if (opt_.world_size == 1) return;
    const int right = (opt_.rank + 1) % opt_.world_size, left = (opt_.rank + opt_.world_size - 1) % opt_.world_size;
    CollectiveHeader theirs;
    mesh_.send_recv(right, &mine, sizeof mine, left, &theirs, sizeof theirs);
    check_same(mine, theirs, left);
  }

  // all_to_all: at step s this rank sends to rank r + s while receiving from rank r - s, so every
  // pair meets once and nobody waits on a rank that waits on it. The row counts go first: a rank
  // whose splits disagree with a peer's fails naming both, instead of reading the wrong bytes.
  void pairwise_exchange(char* out, const char* in, const AllToAllLayout& l) {
    const int w = opt_.world_size, r = opt_.rank;
    LF_CHECK(l.send_rows[r] == l.recv_rows[r], BackendError,
             "rank {}: all_to_all sends {} rows to itself but expects {} from itself", r, l.send_rows[r], l.recv_rows[r]);
    if (l.send_bytes(r) > 0) std::memcpy(out + l.recv_offset(r), in + l.send_offset(r), l.send_bytes(r));
    for (int s = 1; s < w; ++s) {
      const int to = (r + s) % w, from = (r - s + w) % w;
      int64_t mine = l.send_rows[to], theirs = -1;
      mesh_.send_recv(to, &mine, sizeof mine, from, &theirs, sizeof theirs);
      LF_CHECK(theirs == l.recv_rows[from], BackendError,
               "rank {}: all_to_all expects {} rows from rank {}, which sends {} (the ranks' splits disagree: "
               "exchange the counts first)",
               r, l.recv_rows[from], from, theirs);
      mesh_.send_recv(to, in + l.send_offset(to), l.send_bytes(to), from, out + l.recv_offset(from), l.recv_bytes(from));
    }
  }

  // Afterwards rank r holds chunk r reduced over every rank (elementwise sum or max).
  void ring_reduce_scatter(at::Tensor flat, bool max) {
    const int w = opt_.world_size, r = opt_.rank;
    if (w == 1) return;
    const int64_t n = flat.numel();
    const int right = (r + 1) % w, left = (r + w - 1) % w;
    at::Tensor scratch = at::empty({n / w + 1}, flat.options());
    for (int s = 0; s < w - 1; ++s) {
      int send_i = (r - s - 1 + 2 * w) % w, recv_i = (r - s - 2 + 2 * w) % w;
      auto [sb, se] = chunk_range(n, w, send_i);
      auto [rb, re] = chunk_range(n, w, recv_i);
      auto incoming = scratch.narrow(0, 0, re - rb);
      mesh_.send_recv(right, flat.narrow(0, sb, se - sb).data_ptr(), (se - sb) * flat.element_size(), left,
                      incoming.data_ptr(), (re - rb) * flat.element_size());
      auto mine = flat.narrow(0, rb, re - rb);
      if (max) at::maximum_out(mine, mine, incoming);
      else mine.add_(incoming);
    }
  }

  // Rank r starts with chunk r final; afterwards every rank has every chunk.
  void ring_all_gather(at::Tensor flat) {
    const int w = opt_.world_size, r = opt_.rank;
    if (w == 1) return;
    const int64_t n = flat.numel();
    const int right = (r + 1) % w, left = (r + w - 1) % w;
    for (int s = 0; s < w - 1; ++s) {
      int send_i = (r - s + w) % w, recv_i = (r - s - 1 + w) % w;
      auto [sb, se] = chunk_range(n, w, send_i);
      auto [rb, re] = chunk_range(n, w, recv_i);
      mesh_.send_recv(right, flat.narrow(0, sb, se - sb).data_ptr(), (se - sb) * flat.element_size(), left,
                      flat.narrow(0, rb, re - rb).data_ptr(), (re - rb) * flat.element_size());
    }
  }

  CommOptions opt_;
  rdzv::StoreClient store_;
  TcpMesh mesh_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_;
  bool stopping_ = false, aborted_ = false;
  bool running_ = false;          // a collective is on the communicator thread (under mu_)
  std::exception_ptr failed_;     // the first collective's failure (communicator thread only)
  uint64_t seq_ = 0;  // collectives run so far (communicator thread only)
  std::thread thread_;
};

}  // namespace

std::unique_ptr<Communicator> make_cpu_communicator(const CommOptions& options) {
  return std::make_unique<CpuCommunicator>(options);
}

}  // namespace lf::comm
