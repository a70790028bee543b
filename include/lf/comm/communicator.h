#pragma once
// The one interface every collective goes through (DESIGN.md "Communication").
// Backends: NCCL on GPU (its own stream, ordered with events); on CPU a small
// TCP backend of lf-train's own (the torch wheel ships no Gloo headers), for
// tests and GPU-less machines. Collectives are asynchronous and run in the
// order they were issued on every rank; Work::wait() blocks until the result
// is in the tensor. Threading: issue collectives from one thread.
#include <ATen/core/Tensor.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace lf::comm {

enum class ReduceOp { kSum, kAvg, kMax };

class Work {
 public:
  virtual ~Work() = default;
  // After wait() returns, work the caller queues sees the result: on CPU the data
  // is there; on NCCL the caller's current CUDA stream waits (the host doesn't).
  // Throws the collective's error (BackendError, TimeoutError).
  virtual void wait() = 0;
  virtual bool is_done() const = 0;
};
using WorkPtr = std::shared_ptr<Work>;

struct CommOptions {
  int rank = 0;
  int world_size = 1;
  std::string key_prefix = "comm";  // store namespace: include the generation (restarts)
  double timeout_s = 300;           // per collective
  // The job's store; store_port 0: from the worker environment (LF_RDZV_ADDR/PORT, ...).
  std::string store_addr;
  uint16_t store_port = 0;
  std::string job_id = "none";
  std::string token;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual const char* backend() const = 0;
  // In place, every rank ends with the reduction of every rank's `tensor` (contiguous).
  virtual WorkPtr all_reduce(at::Tensor tensor, ReduceOp op = ReduceOp::kSum) = 0;
  virtual WorkPtr broadcast(at::Tensor tensor, int root) = 0;
  // output = concat over ranks of input (output.numel() == world * input.numel()).
  virtual WorkPtr all_gather(at::Tensor output, at::Tensor input) = 0;
  // output = this rank's 1/world slice of the sum over ranks of input.
  virtual WorkPtr reduce_scatter(at::Tensor output, at::Tensor input) = 0;
  // torch's all_to_all_single over dim 0 (expert parallelism's token dispatch): input's first
  // input_splits[r] rows go to rank 0, the next to rank 1, ...; output receives output_splits[r]
  // rows from rank r, in rank order. Rows have the same width and dtype on every rank, and rank
  // a's input_splits[b] equals rank b's output_splits[a] (the caller exchanges the counts first;
  // the CPU backend checks them and names the ranks). Splits empty: equal splits of dim 0.
  virtual WorkPtr all_to_all(at::Tensor output, at::Tensor input, std::vector<int64_t> output_splits,
                             std::vector<int64_t> input_splits) = 0;
  virtual void barrier() = 0;
  // Unblocks and fails every pending collective (another rank died): never hangs.
  virtual void abort() = 0;
};

// The CPU backend over TCP. Rank addresses are exchanged through the job's store.
std::unique_ptr<Communicator> make_cpu_communicator(const CommOptions& options);
// A world of one: collectives are local copies (a sharded strategy on one process).
std::unique_ptr<Communicator> make_local_communicator();
// The NCCL backend on the current CUDA device (builds with LF_WITH_CUDA only).
std::unique_ptr<Communicator> make_nccl_communicator(const CommOptions& options);

// Debug mode for hangs (LF_COMM_CHECK=1, or torch's TORCH_DISTRIBUTED_DEBUG=DETAIL): before
// each collective every rank posts what it is about to issue to the job's store and waits
// for the others'. Ranks that issue different collectives fail at once, each rank's listed
// (NCCL would hang, or read one collective's bytes as another's). A rank that never issues
// it is named in a warning every `warn_every` and in a TimeoutError after options.timeout_s,
// instead of a silent hang. Costs store round trips and a wait for the slowest rank per
// collective (no overlap left): for finding a hang, not for speed.
std::unique_ptr<Communicator> with_collective_check(std::unique_ptr<Communicator> inner, const CommOptions& options,
                                                    std::chrono::milliseconds warn_every = std::chrono::seconds(30));
// LF_COMM_CHECK=1|0 (ConfigError on another value), else TORCH_DISTRIBUTED_DEBUG=DETAIL.
bool collective_check_requested();

}  // namespace lf::comm
