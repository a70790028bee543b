#pragma once
// The gradient projectors of GaLore and APOLLO (galore-torch's GaLoreProjector, apollo-torch's
// GradientProjector), operation for operation: a matrix gradient [m, n] goes to a low-rank one through an
// orthogonal basis refreshed every `update_interval` steps (the step count before the update: 0, k, 2k, ...):
//   svd    U, s, Vh = svd(grad); right: Vh[:rank] [rank, n], left: U[:, :rank] [m, rank], full: both
//   random N(0, 1) / sqrt(rank) of those shapes from a CPU generator seeded by the parameter's seed, which
//          advances to the last of 15 random int64 drawn from it after each refresh
// proj_type std: right when m >= n (grad @ P^T [m, rank]), else left (P^T @ grad [rank, n]); reverse_std the
// other way; right, left, full (svd only) as named. project_back (GaLore) maps a low-rank update back and
// multiplies by `scale`. Internal to lf_optim.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace lf::optim {

class LowRankProjector {
 public:
  enum class Basis { kSvd, kRandom };
  LowRankProjector(Basis basis, int64_t rank, int64_t update_interval, double scale, std::string proj_type,
                   int64_t seed = 0);

  at::Tensor project(const at::Tensor& grad, int64_t iter);
  // project() with the current basis, never refreshed (a restore sizes the low-rank moments with it).
  at::Tensor apply(const at::Tensor& grad) const;
  at::Tensor project_back(const at::Tensor& low_rank) const;

  // Checkpoints: the basis ([rank, n] or [m, rank]; full: the left one, `ortho_right` the right one) and the
  // random basis' next seed.
  at::Tensor& ortho() { return ortho_; }
  at::Tensor& ortho_right() { return ortho_right_; }
  int64_t& seed() { return seed_; }
  // The basis `grad`'s shape gets (for a restore before any step): allocates ortho()/ortho_right().
  void allocate_like(const at::Tensor& grad);

 private:
  // The orientation project() uses for a gradient of this shape: 'r', 'l' or 'f'.
  char side(const at::Tensor& grad) const;
  void refresh(const at::Tensor& grad, char side);

  Basis basis_;
  int64_t rank_, update_interval_;
  double scale_;
  std::string proj_type_;
  int64_t seed_;
  at::Tensor ortho_, ortho_right_;
};

}  // namespace lf::optim
