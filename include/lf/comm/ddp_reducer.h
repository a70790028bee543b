#pragma once
// Data-parallel gradient reduction (DDP), llm.c-style, on top of Communicator:
// trainable parameters are packed into buckets in reverse registration order
// (gradients arrive roughly last layer first), rebuilt after the first step in the
// order they really arrived (rank 0's), the first bucket small so communication
// starts early. A gradient reaches its bucket one of two ways: a hook copies the
// parameter's accumulated gradient during the final micro-step's backward, or
// (external parameters, through the owner's model::GradSink) the bucket itself
// accumulates every micro-step's gradient as the compute-dtype cast hands it over.
// A bucket's all-reduce (SUM: the loss is already normalised by the step's global
// target count) starts as soon as the bucket is complete, overlapping the rest of
// backward; buckets are launched in index order on every rank. An embedding's
// lookup gradient may come as rows (take_rows), all-gathered after backward and
// added to its reduced gradient. Non-final accumulation micro-steps communicate
// nothing.
//
// Threading: hooks run on the autograd thread; call the other methods from the
// training thread, around backward(). Owns its hooks for the model's lifetime.
#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lf/comm/communicator.h"

namespace lf::comm {

struct DdpOptions {
  double bucket_cap_mb = 25;      // ddp_bucket_cap_mb
  double first_bucket_mb = 1;     // torch DDP's 1 MiB first bucket
  at::ScalarType reduce_dtype = at::kFloat;  // fp32 or bf16 on the wire
  // Embedding rows looked up per micro-step, at most (equal on every rank; 0: an embedding's
  // gradient is reduced densely), and their dtype on the wire (the compute dtype).
  int64_t sparse_rows_bound = 0;
  at::ScalarType sparse_rows_dtype = at::kFloat;
  // The parameters (indices into the constructor's list) whose rows may come: fixed up front,
  // so every rank exchanges the same rows even when one has no micro-batch in a step.
  std::vector<int64_t> row_params;
  // Of row_params, those with no dense gradient at all (an untied embedding): kept out of the
  // buckets, never all-reduced; their gradient is zeros plus every rank's rows.
  std::vector<int64_t> rows_only_params;
};

// What happened, with timestamps, for tests and profiling.
struct DdpEvent {
  std::string what;  // "launch", "backward_end", "done"
  int64_t bucket = -1;
  std::chrono::steady_clock::time_point t;
};

class DdpReducer {
 public:
  // params: the trainable parameters (leaf tensors with requires_grad), in model order.
  DdpReducer(Communicator& comm, std::vector<at::Tensor> params, DdpOptions options = {});
  ~DdpReducer();
  DdpReducer(const DdpReducer&) = delete;
  DdpReducer& operator=(const DdpReducer&) = delete;

  // The model::GradSink side (the trainer adapts it): `param`'s gradient will come as
  // take_external() calls, one per use expected in this micro-step's forward, and the bucket
  // accumulates it over the step's micro-steps (no .grad until finish_backward). False (the
  // caller then casts with plain autograd): not one of ours, or the bucket's dtype differs
  // from the parameter's (a bf16 wire would accumulate micro-steps in bf16).
  bool expect_external(const at::Tensor& param);
  void take_external(const at::Tensor& param, const at::Tensor& grad);  // autograd thread
  // The embedding side of model::GradSink: `param`'s lookups hand their (ids, gradient rows)
  // here; finish_backward all-gathers every rank's rows (padded to sparse_rows_bound per
  // micro-step) and adds them after the dense part's all-reduce, instead of all-reducing a
  // dense [V,C] lookup gradient at the very end of backward. False: not enabled, or not ours.
  bool expect_rows(const at::Tensor& param);
  void take_rows(const at::Tensor& param, const at::Tensor& ids, const at::Tensor& grad_rows);

  // Rank `root`'s values into every rank's parameters (before the first step).
  void broadcast_parameters(int root = 0);
  // Before each micro-step's backward: sync = true on the optimizer step's last micro-step.
  void prepare_backward(bool sync);
  // After the last micro-step's backward: launches what is left, waits, and leaves every
  // parameter's .grad = the sum over ranks: when the reduce dtype is the parameter's, a view
  // of its bucket (no copy), valid until the next prepare_backward (zero_grad releases it).
  // Throws the communicator's errors.
  void finish_backward();

  int64_t num_buckets() const;
  // Parameter indices (constructor order) bucket by bucket, in the order buckets are sent.
  std::vector<int64_t> bucket_order() const;
  int64_t collectives_issued() const;
  // The current (or last finished) optimizer step's events: launches and backward's end.
  std::vector<DdpEvent> events() const;

  struct State;

 private:
  // After the first step: buckets in the order gradients arrived (rank 0's), from step 2 on.
  void settle_bucket_order();
  std::shared_ptr<State> state_;
};

}  // namespace lf::comm
