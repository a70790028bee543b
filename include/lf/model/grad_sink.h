#pragma once
// Where the gradient of a weight stored in a wider dtype than it is computed in (fp32
// master weights under bf16) goes when a consumer keeps gradients in buffers of its own
// (DDP's buckets). Layers cast such weights with cast_for_compute(); with a sink, the
// cast's backward hands the compute-dtype gradient to the sink, which converts it
// straight into its buffer, and autograd stores nothing in .grad. Without a sink the
// cast is a plain autograd cast: the gradient is converted into a new tensor, then copied
// into the bucket by a hook; the sink saves that tensor and the copy (14 -> 6 bytes
// moved per fp32 parameter, on the step's critical path).
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

namespace lf::model {

class GradSink {
 public:
  virtual ~GradSink() = default;
  // Forward, autograd on: `param` is about to be used once in the graph. False: the sink
  // does not keep this parameter (the cast is then plain autograd).
  virtual bool expect(const at::Tensor& param) = 0;
  // Backward (autograd thread): one use's gradient, in the compute dtype. The sink must
  // take every gradient of a parameter it expected.
  virtual void take(const at::Tensor& param, const at::Tensor& grad) = 0;

  // The embedding lookup: a sink that expects `param`'s rows gets, for each lookup, the ids
  // and the gradient rows (compute dtype) instead of a dense [V,C] gradient, and adds them
  // into the parameter's gradient itself (DDP: after the dense part's all-reduce, exchanging
  // only the rows every rank touched).
  virtual bool expect_rows(const at::Tensor& param) { return false; }
  virtual void take_rows(const at::Tensor& param, const at::Tensor& ids, const at::Tensor& grad_rows) {}
};

// `weight` in `dtype` for one use in a layer: itself when the dtypes match, else a cast
// whose gradient goes to `sink` (when given, autograd is on and the sink expects it).
at::Tensor cast_for_compute(const at::Tensor& weight, c10::ScalarType dtype, GradSink* sink);

// embedding(weight, ids) in `dtype`; with a sink that expects the rows, the gradient goes to
// sink->take_rows() instead of a dense gradient for weight.
// *rows_to_sink (optional): whether the rows went to the sink.
at::Tensor embed_for_compute(const at::Tensor& weight, const at::Tensor& ids, c10::ScalarType dtype, GradSink* sink,
                             bool* rows_to_sink = nullptr);

}  // namespace lf::model
