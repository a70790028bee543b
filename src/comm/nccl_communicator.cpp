// The GPU backend: NCCL directly (DESIGN.md "Communication"). One communicator
// per process group, its unique id exchanged through the job's store; every
// collective runs on a dedicated stream ordered after the caller's stream with
// an event, so it overlaps compute; Work::wait() makes the caller's current
// stream wait (the host does not block). A watchdog thread turns a stuck or
// failed collective into ncclCommAbort + BackendError within the timeout
// instead of a 10-minute hang.
#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <fmt/format.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "lf/common/cuda_event.h"
#include "lf/comm/communicator.h"
#include "lf/comm/rank_agreement.h"
#include "lf/common/env.h"
#include "lf/common/env_knobs.h"
#include "lf/common/error.h"
#include "all_to_all_layout.h"
#include "comm_store.h"
#include "lf/rendezvous/store_client.h"

namespace lf::comm {

namespace {

using Clock = std::chrono::steady_clock;

#define LF_NCCL_CHECK(call, rank)                                                                              \
  do {                                                                                                         \
    ncclResult_t lf_nccl_rc = (call);                                                                          \
    LF_CHECK(lf_nccl_rc == ncclSuccess, BackendError, "rank {}: {} failed: {} ({})", rank, #call,             \
             ncclGetErrorString(lf_nccl_rc), ncclGetLastError(nullptr));                                       \
  } while (0)

#define LF_CUDA_CHECK(call)                                                                                   \
  do {                                                                                                        \
    cudaError_t lf_cuda_rc = (call);                                                                          \
    LF_CHECK(lf_cuda_rc == cudaSuccess, BackendError, "{} failed: {}", #call, cudaGetErrorString(lf_cuda_rc)); \
  } while (0)

using Event = CudaEvent;

ncclDataType_t nccl_type(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return ncclFloat32;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kDouble: return ncclFloat64;
    case at::kLong: return ncclInt64;
    case at::kInt: return ncclInt32;
    case at::kByte: return ncclUint8;
    default: LF_THROW(BackendError, "NCCL: unsupported dtype {}", c10::toString(t));
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kAvg: return ncclAvg;
    case ReduceOp::kMax: return ncclMax;
  }
  return ncclSum;
}

// LF_NCCL_CTA_POLICY=efficiency|zero|default: NCCL's CTA policy (NCCL >= 2.27), e.g. fewer
// SMs for DDP's collectives so backward's GEMMs keep more (NCCL_MIN_CTAS / NCCL_MAX_CTAS are
// NCCL's own variables). Unset: NCCL's default.
int cta_policy_from_env() {
  const auto v = knob_string("LF_NCCL_CTA_POLICY");
  if (!v || v->empty() || *v == "default") return NCCL_CONFIG_UNDEF_INT;
#ifdef NCCL_CTA_POLICY_EFFICIENCY
  if (*v == "efficiency") return NCCL_CTA_POLICY_EFFICIENCY;
#endif
#ifdef NCCL_CTA_POLICY_ZERO
  if (*v == "zero") return NCCL_CTA_POLICY_ZERO;
#endif
  LF_THROW(ConfigError, "LF_NCCL_CTA_POLICY={}: expected default, efficiency or zero, as far as this NCCL ({}) "
           "supports them", *v, NCCL_VERSION_CODE);
}

class NcclWork : public Work {
 public:
  NcclWork(c10::cuda::CUDAStream comm_stream, std::shared_ptr<std::atomic<bool>> failed,
           std::shared_ptr<std::string> failure)
      : stream_(comm_stream), failed_(std::move(failed)), failure_(std::move(failure)), started_(Clock::now()) {}
  void record() { done_.record(stream_.stream()); }
  void wait() override {
    check();
    done_.block(c10::cuda::getCurrentCUDAStream(stream_.device_index()).stream());
  }
  bool is_done() const override { return done_.query(); }
  Clock::time_point started() const { return started_; }

 private:
  void check() const {
    LF_CHECK(!failed_->load(), BackendError, "NCCL communicator failed: {}", *failure_);
  }
  c10::cuda::CUDAStream stream_;
  Event done_;
  std::shared_ptr<std::atomic<bool>> failed_;
  std::shared_ptr<std::string> failure_;
  Clock::time_point started_;
};

class NcclCommunicator : public Communicator {
 public:
  explicit NcclCommunicator(const CommOptions& o)
      : opt_(o), device_(c10::cuda::current_device()), stream_(c10::cuda::getStreamFromPool(true, device_)),
        failed_(std::make_shared<std::atomic<bool>>(false)), failure_(std::make_shared<std::string>()) {
    auto store = connect_store(o);
    const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
    // Ranks with different NCCL libraries fail inside init in obscure ways: say it first.
    int version = 0;
    LF_NCCL_CHECK(ncclGetVersion(&version), o.rank);
    require_same_on_every_rank(store, o.key_prefix, o.rank, o.world_size, "NCCL version",
                               fmt::format("{}.{}.{}", version / 10000, version / 100 % 100, version % 100), timeout);
    ncclUniqueId id;
    std::string key = o.key_prefix + "/nccl_unique_id";
    if (o.rank == 0) {
      LF_NCCL_CHECK(ncclGetUniqueId(&id), o.rank);
      store.set(key, std::string(reinterpret_cast<const char*>(&id), sizeof(id)));
    } else {
      store.wait({key}, timeout);
      std::string bytes = *store.get(key);
      LF_CHECK(bytes.size() == sizeof(id), BackendError, "NCCL unique id of {} bytes, expected {} (NCCL version "
               "mismatch between nodes?)", bytes.size(), sizeof(id));
      std::memcpy(&id, bytes.data(), sizeof(id));
    }
    c10::cuda::CUDAGuard guard(device_);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
#ifdef NCCL_CTA_POLICY_EFFICIENCY  // the field came with the policies (NCCL 2.27)
    config.CTAPolicy = cta_policy_from_env();
#else
    (void)cta_policy_from_env();  // rejects a policy this NCCL cannot apply
#endif
    ncclResult_t rc = ncclCommInitRankConfig(&comm_, o.world_size, id, o.rank, &config);
    LF_CHECK(rc == ncclSuccess, BackendError,
             "rank {}: NCCL init failed: {} ({}). Check NCCL_SOCKET_IFNAME (an interface every node has), that the "
             "nodes can reach each other, and that every node runs the same NCCL version; NCCL_DEBUG=INFO shows more",
             o.rank, ncclGetErrorString(rc), ncclGetLastError(nullptr));
    watchdog_ = std::thread([this] { watch(); });
  }

  ~NcclCommunicator() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    watchdog_.join();
    // An aborted communicator is already released (fail()).
    if (comm_ && !failed_->load()) ncclCommDestroy(comm_);
  }

  int rank() const override { return opt_.rank; }
  int world_size() const override { return opt_.world_size; }
  const char* backend() const override { return "nccl"; }

  WorkPtr all_reduce(at::Tensor t, ReduceOp op) override {
    return launch({t}, [&](cudaStream_t s) {
      return ncclAllReduce(t.data_ptr(), t.data_ptr(), t.numel(), nccl_type(t.scalar_type()), nccl_op(op), comm_, s);
    });
  }

  WorkPtr broadcast(at::Tensor t, int root) override {
    return launch({t}, [&](cudaStream_t s) {
      return ncclBroadcast(t.data_ptr(), t.data_ptr(), t.numel(), nccl_type(t.scalar_type()), root, comm_, s);
    });
  }

  WorkPtr all_gather(at::Tensor output, at::Tensor input) override {
    LF_CHECK(output.numel() == input.numel() * opt_.world_size, BackendError,
             "all_gather: output has {} elements, expected world {} x input {}", output.numel(), opt_.world_size,
             input.numel());
    return launch({output, input}, [&](cudaStream_t s) {
      return ncclAllGather(input.data_ptr(), output.data_ptr(), input.numel(), nccl_type(input.scalar_type()), comm_, s);
    });
  }

  WorkPtr reduce_scatter(at::Tensor output, at::Tensor input) override {
    LF_CHECK(input.numel() == output.numel() * opt_.world_size, BackendError,
             "reduce_scatter: input has {} elements, expected world {} x output {}", input.numel(), opt_.world_size,
             output.numel());
    return launch({output, input}, [&](cudaStream_t s) {
      return ncclReduceScatter(input.data_ptr(), output.data_ptr(), output.numel(), nccl_type(input.scalar_type()),
                               ncclSum, comm_, s);
    });
  }

  // Point-to-point in one group (NCCL has no all_to_allv): every peer's send and receive are
  // posted together, so NCCL schedules them without a deadlock; bytes as ncclUint8 (any dtype).
  WorkPtr all_to_all(at::Tensor output, at::Tensor input, std::vector<int64_t> output_splits,
                     std::vector<int64_t> input_splits) override {
    const auto l = all_to_all_layout(output, input, output_splits, input_splits, opt_.world_size);
    return launch({output, input}, [&](cudaStream_t s) {
      auto* out = static_cast<char*>(output.data_ptr());
      const auto* in = static_cast<const char*>(input.data_ptr());
      ncclResult_t rc = ncclGroupStart();
      for (int r = 0; r < opt_.world_size && rc == ncclSuccess; ++r) {
        if (l.send_bytes(r) > 0) rc = ncclSend(in + l.send_offset(r), l.send_bytes(r), ncclUint8, r, comm_, s);
        if (rc == ncclSuccess && l.recv_bytes(r) > 0)
          rc = ncclRecv(out + l.recv_offset(r), l.recv_bytes(r), ncclUint8, r, comm_, s);
      }
      const ncclResult_t end = ncclGroupEnd();
      return rc != ncclSuccess ? rc : end;
    });
  }

  void barrier() override {
    auto t = at::zeros({1}, at::TensorOptions(at::kFloat).device(at::kCUDA, device_));
    all_reduce(t, ReduceOp::kSum)->wait();
    c10::cuda::getCurrentCUDAStream(device_).synchronize();
  }

  void abort() override { fail("aborted by the caller (another rank failed)"); }

 private:
  template <typename Fn>
  WorkPtr launch(std::initializer_list<at::Tensor> tensors, Fn&& call) {
    LF_CHECK(!failed_->load(), BackendError, "rank {}: NCCL communicator already failed: {}", opt_.rank, *failure_);
    for (const auto& t : tensors)
      LF_CHECK(t.is_cuda() && t.is_contiguous() && t.device().index() == device_, BackendError,
               "rank {}: NCCL needs contiguous tensors on cuda:{} (got {})", opt_.rank, device_, t.device().str());
    c10::cuda::CUDAGuard guard(device_);
    // The collective must see what the caller's stream produced.
    Event ready;
    ready.record(c10::cuda::getCurrentCUDAStream(device_).stream());
    ready.block(stream_.stream());
    // The call itself can block on the host (NCCL connects lazily, at a peer's first
    // collective): the watchdog times that out too, by aborting the communicator.
    host_call_since_.store(Clock::now().time_since_epoch().count());
    const ncclResult_t rc = call(stream_.stream());
    host_call_since_.store(0);
    LF_CHECK(!failed_->load(), BackendError, "rank {}: NCCL communicator failed: {}", opt_.rank, *failure_);
    LF_NCCL_CHECK(rc, opt_.rank);
    // The caching allocator must not hand these blocks out again before the collective is done.
    for (const auto& t : tensors) c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), stream_);
    auto work = std::make_shared<NcclWork>(stream_, failed_, failure_);
    work->record();
    {
      std::lock_guard lock(mu_);
      pending_.push_back(work);
    }
    cv_.notify_all();
    return work;
  }

  // Once: records why, then aborts (unblocks a host-blocked call, stops the kernels).
  void fail(const std::string& why) {
    std::lock_guard lock(fail_mu_);
    if (failed_->load()) return;
    *failure_ = why;
    failed_->store(true);  // only here, under fail_mu_: "failed" and "aborted" are one state
    ncclCommAbort(comm_);
  }

  // Polls the oldest pending collective and NCCL's async error: a peer that died
  // surfaces here as an error, a hang as a timeout, both within the timeout.
  void watch() {
    const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(opt_.timeout_s * 1000));
    std::unique_lock lock(mu_);
    while (!stopping_) {
      cv_.wait_for(lock, std::chrono::milliseconds(100));
      while (!pending_.empty() && pending_.front()->is_done()) pending_.pop_front();
      ncclResult_t async = ncclSuccess;
      {
        std::lock_guard guard(fail_mu_);  // not while fail() releases the communicator
        if (failed_->load()) continue;
        ncclCommGetAsyncError(comm_, &async);
      }
      const auto host_since = host_call_since_.load();
      const bool host_stuck =
          host_since != 0 && Clock::now() - Clock::time_point(Clock::duration(host_since)) > timeout;
      const bool device_stuck = !pending_.empty() && Clock::now() - pending_.front()->started() > timeout;
      if (async != ncclSuccess && async != ncclInProgress) {
        lock.unlock();
        fail(fmt::format("rank {}: NCCL async error: {}", opt_.rank, ncclGetErrorString(async)));
        lock.lock();
      } else if (host_stuck || device_stuck) {
        lock.unlock();
        fail(fmt::format("rank {}: a collective did not {} within {} s (a peer died or hangs)", opt_.rank,
                         host_stuck ? "start" : "finish", opt_.timeout_s));
        lock.lock();
      }
    }
  }

  CommOptions opt_;
  c10::DeviceIndex device_;
  c10::cuda::CUDAStream stream_;
  ncclComm_t comm_ = nullptr;
  std::shared_ptr<std::atomic<bool>> failed_;
  std::shared_ptr<std::string> failure_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<NcclWork>> pending_;
  bool stopping_ = false;
  std::atomic<Clock::rep> host_call_since_{0};  // steady-clock ticks while inside an NCCL call; 0 outside
  std::mutex fail_mu_;
  std::thread watchdog_;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(const CommOptions& options) {
  return std::make_unique<NcclCommunicator>(options);
}

}  // namespace lf::comm
