#pragma once
// Where the gradient of a weight goes when a parallel strategy keeps gradients in buffers
// of its own (DDP's buckets, ZeRO's unit buffers) instead of autograd's .grad.
//
// The model stays single-device and knows no strategy: a strategy attaches a route to each
// parameter from outside (set_grad_route, a per-parameter table keyed by the tensor), and
// the layers cast their weights with cast_for_compute(), which consults the table. With a
// route, the cast's backward hands the compute-dtype gradient of that use to the sink,
// which adds it into its own buffer, and autograd stores nothing in .grad. Without one the
// cast is a plain autograd cast (the gradient is converted into a new tensor, then copied
// into the bucket by a hook; the sink saves that tensor and the copy: 14 -> 6 bytes moved
// per fp32 parameter, on the step's critical path).
//
// Threading: routes are set before training (training thread); lookups happen in forward
// (training thread) and in activation-checkpointing recomputes (autograd thread), never
// concurrently with a set. A table, not a pointer in every layer, so that two models (ranks
// as threads in tests) route independently.
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

namespace lf::model {

class GradSink {
 public:
  virtual ~GradSink() = default;
  // Forward, autograd on: `param` is about to be used once in the graph. False: the sink
  // does not keep this parameter (the cast is then plain autograd).
  virtual bool expect(const at::Tensor& param) = 0;
  // Backward (autograd thread): one use's gradient, in the compute dtype (fp32 for the LM
  // head's weight, which the loss computes in fp32). The sink must take every gradient of a
  // parameter it expected.
  virtual void take(const at::Tensor& param, const at::Tensor& grad) = 0;
  // Whether weights already stored in the compute dtype route here too (ZeRO keeps its
  // parameters in the compute dtype; DDP's fp32 path keeps plain autograd for them).
  virtual bool routes_same_dtype() const { return false; }

  // The embedding lookup: a sink that expects `param`'s rows gets, for each lookup, the ids
  // and the gradient rows (compute dtype) instead of a dense [V,C] gradient, and adds them
  // into the parameter's gradient itself (DDP: after the dense part's all-reduce, exchanging
  // only the rows every rank touched).
  virtual bool expect_rows(const at::Tensor& param) { return false; }
  virtual void take_rows(const at::Tensor& param, const at::Tensor& ids, const at::Tensor& grad_rows) {}
};

// `param`'s gradients go to `sink` from now on (nullptr: back to plain autograd).
void set_grad_route(const at::Tensor& param, GradSink* sink);
// The sink attached to `param`, or nullptr.
GradSink* grad_route(const at::Tensor& param);

// `weight` in `dtype` for one use in a layer: itself when the dtypes match and its route
// does not take same-dtype weights, else a cast whose gradient goes to the route (when
// there is one, autograd is on and it expects the use).
at::Tensor cast_for_compute(const at::Tensor& weight, c10::ScalarType dtype);

// embedding(weight, ids) in `dtype`; when weight's route expects the rows, the gradient goes
// to its take_rows() instead of a dense gradient for weight.
// *rows_to_sink (optional): whether the rows went to the sink.
at::Tensor embed_for_compute(const at::Tensor& weight, const at::Tensor& ids, c10::ScalarType dtype,
                             bool* rows_to_sink = nullptr);

}  // namespace lf::model
