#include "low_rank_projector.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "lf/common/error.h"

namespace lf::optim {

namespace {

// apollo-torch's stable_randn: a fresh CPU generator seeded by `seed`.
at::Tensor stable_randn(at::IntArrayRef shape, int64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed));
  return at::randn(shape, gen, at::TensorOptions().dtype(at::kFloat));
}

// apollo-torch's next_seed: the last of 15 random int64 in [0, int64 max) from a generator seeded by `seed`.
int64_t next_seed(int64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed));
  const auto draws = at::randint(0, std::numeric_limits<int64_t>::max(), {15}, gen, at::TensorOptions().dtype(at::kLong));
  return draws[14].item<int64_t>();
}

}  // namespace

LowRankProjector::LowRankProjector(Basis basis, int64_t rank, int64_t update_interval, double scale,
                                   std::string proj_type, int64_t seed)
    : basis_(basis), rank_(rank), update_interval_(update_interval), scale_(scale),
      proj_type_(std::move(proj_type)), seed_(seed) {
  LF_CHECK(proj_type_ == "std" || proj_type_ == "reverse_std" || proj_type_ == "right" || proj_type_ == "left" ||
               (proj_type_ == "full" && basis == Basis::kSvd),
           ConfigError, "projection type {}: expected std, reverse_std, right, left{}", proj_type_,
           basis == Basis::kSvd ? " or full" : " (apollo-torch's random projection has no full)");
}

char LowRankProjector::side(const at::Tensor& grad) const {
  const bool tall = grad.size(0) >= grad.size(1);
  if (proj_type_ == "std") return tall ? 'r' : 'l';
  if (proj_type_ == "reverse_std") return tall ? 'l' : 'r';
  if (proj_type_ == "right") return 'r';
  if (proj_type_ == "left") return 'l';
  return 'f';
}

void LowRankProjector::refresh(const at::Tensor& grad, char s) {
  const auto matrix = grad.to(at::kFloat);
  if (basis_ == Basis::kRandom) {
    // Its device and dtype are the gradient's; the draw is the CPU generator's, as apollo-torch's.
    const auto shape = s == 'l' ? std::vector<int64_t>{matrix.size(0), rank_} : std::vector<int64_t>{rank_, matrix.size(1)};
    ortho_ = (stable_randn(shape, seed_) / std::sqrt(static_cast<double>(rank_))).to(grad.device());
    seed_ = next_seed(seed_);
  } else {
    const auto [u, sv, vh] = at::linalg_svd(matrix, /*full_matrices=*/false);
    if (s == 'r') ortho_ = vh.slice(0, 0, rank_);
    else if (s == 'l') ortho_ = u.slice(1, 0, rank_);
    else {
      ortho_ = u.slice(1, 0, rank_);
      ortho_right_ = vh.slice(0, 0, rank_);
    }
  }
  if (grad.scalar_type() != at::kFloat) {
    ortho_ = ortho_.to(grad.scalar_type());
    if (ortho_right_.defined()) ortho_right_ = ortho_right_.to(grad.scalar_type());
  }
}

at::Tensor LowRankProjector::project(const at::Tensor& grad, int64_t iter) {
  if (!ortho_.defined() || iter % update_interval_ == 0) refresh(grad, side(grad));
  return apply(grad);
}

at::Tensor LowRankProjector::apply(const at::Tensor& grad) const {
  const char s = side(grad);
  if (s == 'r') return at::matmul(grad, ortho_.t());
  if (s == 'l') return at::matmul(ortho_.t(), grad);
  return at::matmul(at::matmul(ortho_.t(), grad), ortho_right_.t());
}

at::Tensor LowRankProjector::project_back(const at::Tensor& low) const {
  at::Tensor full;
  if (proj_type_ == "std")
    full = low.size(0) >= low.size(1) ? at::matmul(low, ortho_) : at::matmul(ortho_, low);
  else if (proj_type_ == "reverse_std")
    full = low.size(0) <= low.size(1) ? at::matmul(ortho_, low) : at::matmul(low, ortho_);
  else if (proj_type_ == "right")
    full = at::matmul(low, ortho_);
  else if (proj_type_ == "left")
    full = at::matmul(ortho_, low);
  else
    full = at::matmul(at::matmul(ortho_, low), ortho_right_);
  return full * scale_;
}

void LowRankProjector::allocate_like(const at::Tensor& grad) {
  const char s = side(grad);
  const auto o = grad.options();
  // An SVD basis has at most min(m, n) vectors (svd with full_matrices false).
  const int64_t r = basis_ == Basis::kSvd ? std::min({rank_, grad.size(0), grad.size(1)}) : rank_;
  // The layout an SVD basis has (LAPACK's column-major U [m, k] and Vh [k, n], k = min(m, n), sliced), so that
  // a restored run multiplies the same strides as the uninterrupted one.
  const int64_t m = grad.size(0), n = grad.size(1), k = std::min(m, n);
  const bool svd = basis_ == Basis::kSvd;
  auto left = [&] { return svd ? at::zeros({k, m}, o).t().slice(1, 0, r) : at::zeros({m, r}, o); };
  auto right = [&] { return svd ? at::zeros({n, k}, o).t().slice(0, 0, r) : at::zeros({r, n}, o); };
  if (s == 'r') ortho_ = right();
  else if (s == 'l') ortho_ = left();
  else {
    ortho_ = left();
    ortho_right_ = right();
  }
}

}  // namespace lf::optim
