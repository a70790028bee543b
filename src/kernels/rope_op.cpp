// RoPE on q and k as one autograd Function over the rope.h launcher: the forward rotates the
// projections in place (marked dirty: nothing is saved but the tables), the backward rotates
// the gradients back into new tensors.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "fused_op_impls.h"
#include "kernel_device.h"
#include "lf/common/error.h"
#include "lf/kernels/rope.h"

namespace lf::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct Tables {
  at::Tensor cos, sin;
  int64_t batch_stride = 0;
};

// [T, D] or [B, 1, T, D] (B == 1 broadcasts) for `batch` rows of `seq` positions.
Tables check_tables(const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& q, int64_t batch, int64_t seq,
                    int64_t head_dim) {
  const bool plain = cos.dim() == 2 && cos.size(0) == seq && cos.size(1) == head_dim;
  const bool batched = cos.dim() == 4 && (cos.size(0) == batch || cos.size(0) == 1) && cos.size(1) == 1 &&
                       cos.size(2) == seq && cos.size(3) == head_dim;
  LF_CHECK((plain || batched) && sin.sizes() == cos.sizes() && cos.scalar_type() == q.scalar_type() &&
               sin.scalar_type() == q.scalar_type() && cos.device() == q.device() && sin.device() == q.device(),
           BackendError, "fused rope: expected cos/sin [{}, {}] or [{}, 1, {}, {}] like q {}, got cos {}, sin {}", seq,
           head_dim, batch, seq, head_dim, describe(q), describe(cos), describe(sin));
  Tables t{cos.contiguous(), sin.contiguous(), 0};
  if (batched && cos.size(0) > 1) t.batch_stride = t.cos.stride(0);
  return t;
}

void launch(const at::Tensor& q_in, const at::Tensor& q_out, const at::Tensor& k_in, const at::Tensor& k_out,
            const Tables& t, int64_t seq, int64_t head_dim, bool inverse) {
  RopeArgs a;
  a.dtype = kernel_dtype(q_in);
  a.batch = q_in.size(0) / seq;
  a.seq = seq;
  a.head_dim = head_dim;
  a.q = {q_in.const_data_ptr(), q_out.mutable_data_ptr(), q_in.size(1) / head_dim, q_in.stride(0), q_out.stride(0)};
  a.k = {k_in.const_data_ptr(), k_out.mutable_data_ptr(), k_in.size(1) / head_dim, k_in.stride(0), k_out.stride(0)};
  a.cos = t.cos.const_data_ptr();
  a.sin = t.sin.const_data_ptr();
  a.table_batch_stride = t.batch_stride;
  a.inverse = inverse;
  run_on_device(q_in, [&](Stream s) { rope(a, s); });
}

struct RopeFn : public torch::autograd::Function<RopeFn> {
  static variable_list forward(AutogradContext* ctx, at::Tensor q, at::Tensor k, const at::Tensor& cos,
                               const at::Tensor& sin, int64_t seq, int64_t head_dim) {
    const auto t = check_tables(cos, sin, q, q.size(0) / seq, seq, head_dim);
    launch(q, q, k, k, t, seq, head_dim, /*inverse=*/false);
    // Written behind ATen's back: bump the versions so that a saved copy of q/k (none today)
    // would fail loudly in backward instead of being silently stale.
    for (auto* x : {&q, &k})
      if (!x->is_inference()) x->unsafeGetTensorImpl()->bump_version();
    ctx->mark_dirty({q, k});
    ctx->saved_data["cos"] = t.cos;
    ctx->saved_data["sin"] = t.sin;
    ctx->saved_data["batch_stride"] = t.batch_stride;
    ctx->saved_data["seq"] = seq;
    ctx->saved_data["head_dim"] = head_dim;
    return {q, k};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const Tables t{ctx->saved_data["cos"].toTensor(), ctx->saved_data["sin"].toTensor(),
                   ctx->saved_data["batch_stride"].toInt()};
    const auto seq = ctx->saved_data["seq"].toInt(), head_dim = ctx->saved_data["head_dim"].toInt();
    const auto gq = grad[0].contiguous(), gk = grad[1].contiguous();
    auto dq = at::empty_like(gq), dk = at::empty_like(gk);
    launch(gq, dq, gk, dk, t, seq, head_dim, /*inverse=*/true);
    return {dq, dk, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// A tensor the forward may overwrite: not a view (autograd would have to rebase its base) and
// contiguous; the model's 2-D projections already are, anything else is copied first.
at::Tensor own(const at::Tensor& x) { return x.is_view() || !x.is_contiguous() ? x.clone(at::MemoryFormat::Contiguous) : x; }

}  // namespace

std::pair<at::Tensor, at::Tensor> rope_qk_op(const at::Tensor& q, const at::Tensor& k, const at::Tensor& cos,
                                             const at::Tensor& sin, int64_t seq_len, int64_t head_dim) {
  LF_CHECK(q.dim() == 2 && k.dim() == 2 && seq_len > 0 && head_dim > 0 && head_dim % 2 == 0 &&
               q.size(0) % seq_len == 0 && k.size(0) == q.size(0) && q.size(1) % head_dim == 0 &&
               k.size(1) % head_dim == 0 && k.scalar_type() == q.scalar_type() && k.device() == q.device() &&
               on_kernel_device(q) && is_kernel_dtype(q),
           BackendError,
           "fused rope: expected q [B*T, H*D] and k [B*T, K*D] (T = {}, D = {}, even) in one float dtype on the "
           "kernels' device, got q {}, k {}",
           seq_len, head_dim, describe(q), describe(k));
  auto out = RopeFn::apply(own(q), own(k), cos, sin, seq_len, head_dim);
  return {out[0], out[1]};
}

}  // namespace lf::kernels
