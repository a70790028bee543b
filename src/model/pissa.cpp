// PiSSA's initialisation (lf/model/pissa.h), op for op as peft 0.18's LoraLayer.pissa_init and torch's
// _svd_lowrank / get_approximate_basis compute it, so a CPU run draws and rounds as the reference does.
#include "lf/model/pissa.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

namespace lf::model {

std::tuple<at::Tensor, at::Tensor, at::Tensor> svd_lowrank(const at::Tensor& a_in, int64_t q, int64_t niter,
                                                           at::Generator& gen) {
  const int64_t m = a_in.size(-2), n = a_in.size(-1);
  const at::Tensor a = m < n ? a_in.mH() : a_in;  // "assume that A is tall"
  // get_approximate_basis(A, q, niter)
  const auto r = at::randn({a.size(-1), q}, gen, a.options());
  auto q_basis = std::get<0>(at::linalg_qr(at::matmul(a, r)));
  for (int64_t i = 0; i < niter; ++i) {
    q_basis = std::get<0>(at::linalg_qr(at::matmul(a.mH(), q_basis)));
    q_basis = std::get<0>(at::linalg_qr(at::matmul(a, q_basis)));
  }
  const auto b = at::matmul(q_basis.mH(), a);
  auto [u, s, vh] = at::linalg_svd(b, /*full_matrices=*/false);
  at::Tensor v = vh.mH();
  u = q_basis.matmul(u);
  if (m < n) std::swap(u, v);
  return {u, s, v};
}

std::pair<at::Tensor, at::Tensor> pissa_init(at::Tensor& weight, int64_t rank, double scaling, int64_t niter,
                                             at::Generator& gen) {
  c10::NoGradGuard no_grad;
  const auto dtype = weight.scalar_type();
  const auto w = weight.to(at::kCPU).to(at::kFloat);  // [out,in]
  at::Tensor vr, sr, uhr;  // peft's names: W^T = U S V^T read as "V S U^T"
  if (niter < 0) {
    auto [v, s, uh] = at::linalg_svd(w, /*full_matrices=*/false);
    vr = v.narrow(1, 0, rank);
    sr = s.narrow(0, 0, rank).clone();
    uhr = uh.narrow(0, 0, rank);
  } else {
    auto [v, s, u] = svd_lowrank(w, rank, niter, gen);
    vr = v;
    sr = s;
    uhr = u.t();
  }
  sr.div_(scaling);
  const auto root = at::diag(at::sqrt(sr));
  auto a = at::matmul(root, uhr);  // [r,in]
  auto b = at::matmul(vr, root);   // [out,r]
  const auto residual = w - at::matmul(b * scaling, a);  // peft: weight - self.scaling * lora_B @ lora_A
  weight.copy_(residual.to(dtype));
  return {a.contiguous(), b.contiguous()};
}

}  // namespace lf::model
