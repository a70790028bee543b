#pragma once
// A linear layer's autograd node without its forward GEMM, for activation checkpointing.
//
// A checkpointed layer's recompute exists only to rebuild what its backward reads. A linear
// layer's backward reads its input and weight, never its output; where nothing else reads that
// output either (o_proj's and down_proj's: their sums with the residual are the kept midpoint and
// the next layer's saved input, checkpointing.h), the recompute gives the projection a node whose
// backward is linear's and whose output is left unwritten (at::empty): its GEMM is not run twice.
// The values of that output and of everything computed from it are garbage; the recompute must
// only back-propagate into them.
#include <ATen/core/Tensor.h>

namespace lf::model {

// x [.., in], w [out, in], b [out] or undefined -> [.., out] uninitialised values; backward:
// dx = g w, dw = g^T x, db = sum g, as at::linear's (for the inputs that require them).
at::Tensor backward_only_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b);

// LF_LEAN_RECOMPUTE (default 1): whether checkpointing recomputes with backward_only_linear for
// the layer's last projection; 0 runs the whole layer again (for comparison). Read at each call.
bool lean_recompute_enabled();

}  // namespace lf::model
