#include "zero_optimizer.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>

#include "lf/ckpt/optimizer_state.h"
#include "lf/model/tensor_io.h"
#include "host_sums.h"

namespace lf::parallel {

namespace {

// The sum of the tensors' squared norms (one device per list), 0 for none.
double squared_norm(const std::vector<at::Tensor>& tensors) {
  if (tensors.empty()) return 0;
  return at::stack(at::_foreach_norm(tensors, 2)).to(at::kDouble).pow(2).sum().item<double>();
}

// 1 when a tensor holds an inf or a NaN (one device per list: one synchronisation), 0 for none.
double any_non_finite(const std::vector<at::Tensor>& tensors) {
  if (tensors.empty()) return 0;
  at::Tensor bad = at::zeros({}, tensors.front().options());
  for (const auto& g : tensors) bad = at::maximum(bad, at::logical_not(at::isfinite(g).all()).to(bad.scalar_type()));
  return bad.item<double>();
}

}  // namespace

ShardedOptimizer::ShardedOptimizer(ZeroContext& z, const StrategySetup& s, const ZeroOptions& o)
    : z_(z),
      weight_decay_(s.optim.weight_decay),
      loraplus_(s.optim.loraplus_lr_ratio == 1.0 ? 0.0 : s.optim.loraplus_lr_ratio) {
  adam_.lr = s.optim.learning_rate;
  adam_.beta1 = s.optim.adam_beta1;
  adam_.beta2 = s.optim.adam_beta2;
  adam_.eps = s.optim.adam_epsilon;
  if (z_.roles.offloaded()) pool_ = std::make_unique<offload::HostThreadPool>(std::max(1, o.host_threads));
}

void ShardedOptimizer::add_unit(ZeroUnit& u, const at::Tensor& values) {
  c10::NoGradGuard no_grad;
  const auto& g = u.params.train;
  auto& s = u.state;
  // Offloaded: plain host memory, page-locked by HostPinning (not torch's pinned allocator).
  const auto so = at::TensorOptions().dtype(at::kFloat).device(u.role.host ? c10::Device(at::kCPU) : z_.device);
  s.master = at::empty({g.shard}, so);
  s.master.copy_(values.narrow(0, g.shard_begin(), g.shard));
  s.exp_avg = at::zeros({g.shard}, so);
  s.exp_avg_sq = at::zeros({g.shard}, so);
  s.grad_shard = at::zeros({g.shard}, so);
  if (u.role.host)
    for (const auto* t : {&s.master, &s.exp_avg, &s.exp_avg_sq, &s.grad_shard})
      s.pinned.emplace_back(*t, z_.device.is_cuda() && z_.roles.pin_memory);
  if (u.role.device_shard) s.device_shard = s.master.to(z_.device, g.dtype(), false, /*copy=*/true);
  s.pieces = g.pieces(s.master, s.grad_shard, s.exp_avg, s.exp_avg_sq);
  for (auto& piece : s.pieces) {
    piece.decays = optim::hf_decays(piece.name);
    for (const auto& p : g.params)
      if (p.name == piece.name)
        piece.lr_scale = optim::loraplus_lr_scale(p.name, static_cast<int64_t>(p.shape.size()), loraplus_);
  }
}

std::vector<at::Tensor> ShardedOptimizer::grad_shards(std::optional<bool> host) const {
  std::vector<at::Tensor> out;
  for (const auto& u : z_.units)
    if (u.trains() && (!host || *host == u.role.host)) out.push_back(u.state.grad_shard);
  return out;
}

bool ShardedOptimizer::unscale(double scale) {
  if (z_.pipeline) z_.pipeline->wait_all();
  c10::NoGradGuard no_grad;
  auto grads = grad_shards();
  if (z_.roles.offloaded()) grad_scale_ /= scale;  // applied by the steps (host and device), not a pass of its own
  else at::_foreach_mul_(grads, 1.0 / scale);
  const double bad = std::max(any_non_finite(grad_shards(false)), any_non_finite(grad_shards(true)));
  return sum_over_ranks(z_.comm, {bad}, z_.device)[0] > 0;
}

double ShardedOptimizer::clip(double max_norm) {
  if (z_.pipeline) z_.pipeline->wait_all();
  c10::NoGradGuard no_grad;
  // The squares of each shard's norm, summed over shards and ranks (the padding holds zeros).
  double local_sq = squared_norm(grad_shards(false));
  const auto host_grads = grad_shards(true);
  if (!host_grads.empty()) {
    // Offloaded, one micro-step: summed on the device as the gradients went down (no host pass).
    const bool on_device = z_.norm.valid && z_.norm.sq.defined();
    z_.log(on_device ? "grad_norm_device" : "grad_norm_host", -1);
    local_sq += on_device ? z_.norm.sq.item<double>() : squared_norm(host_grads);
  }
  // Offloaded gradients are not unscaled yet: their norm is grad_scale_ times the stored one.
  const bool deferred = z_.roles.offloaded();
  const double total = std::sqrt(sum_over_ranks(z_.comm, {local_sq}, z_.device)[0]) * (deferred ? grad_scale_ : 1.0);
  if (max_norm > 0) {
    const double coef = std::min(1.0, max_norm / (total + 1e-6));
    if (coef < 1.0 && deferred) grad_scale_ *= coef;
    else if (coef < 1.0) at::_foreach_mul_(grad_shards(), coef);
  }
  return total;
}

void ShardedOptimizer::host_update(ZeroUnit& u, double lr, double grad_scale, int64_t step_count) {
  for (auto& piece : u.state.pieces) {
    offload::HostAdamWStep step;
    step.lr = lr * piece.lr_scale;
    step.beta1 = adam_.beta1;
    step.beta2 = adam_.beta2;
    step.eps = adam_.eps;
    step.weight_decay = piece.decays ? weight_decay_ : 0.0;
    step.step = step_count;
    step.grad_scale = static_cast<float>(grad_scale);
    offload::host_adamw_update(*pool_, piece.master.data_ptr<float>(), piece.exp_avg.data_ptr<float>(),
                               piece.exp_avg_sq.data_ptr<float>(), piece.grad.data_ptr<float>(), nullptr,
                               piece.end - piece.begin, step);
  }
}

// The fp32 master up on the up stream (async from page-locked memory) and cast into the device
// shard there; the gather or refresh that reads it waits on the device. Its readers of the last
// step are done: the step began after backward's synchronisation.
void ShardedOptimizer::stage_up(int64_t unit) {
  auto& s = z_.units[unit].state;
  if (s.device_shard.defined()) z_.copies->copy_up(unit, s.device_shard, s.master, /*after_caller=*/false);
}

void ShardedOptimizer::step_device(double lr) {
  c10::NoGradGuard no_grad;
  ++steps_;
  if (z_.pipeline) z_.pipeline->wait_all();
  std::vector<at::Tensor> grads = grad_shards(false);
  if (grads.empty()) return;
  // Offloaded runs defer the unscale and clip factors to the steps (the host's does it in its pass).
  if (z_.roles.offloaded() && grad_scale_ != 1.0) at::_foreach_mul_(grads, grad_scale_);
  for (const bool decays : {true, false})
    for (const double scale : loraplus_ > 0 ? std::vector<double>{1.0, loraplus_} : std::vector<double>{1.0}) {
      std::vector<at::Tensor> p, g, m, v;
      for (auto& u : z_.units)
        for (auto& piece : u.state.pieces)
          if (!u.role.host && piece.decays == decays &&
              (loraplus_ <= 0 || (piece.lr_scale != 1.0) == (scale != 1.0))) {
            p.push_back(piece.master);
            g.push_back(piece.grad);
            m.push_back(piece.exp_avg);
            v.push_back(piece.exp_avg_sq);
          }
      if (!p.empty()) optim::adamw_update(p, g, m, v, steps_, lr * scale, decays ? weight_decay_ : 0.0, adam_);
    }
}

// The next forward starts as soon as its first unit is updated (gather / refresh wait per unit),
// and each unit's copy up overlaps the host's work on the next.
void ShardedOptimizer::start_host_step(double lr) {
  z_.pipeline->start(z_.head + 1, [this, lr, scale = grad_scale_, step = steps_](int64_t unit) {
    auto& u = z_.units[unit];
    if (!u.trains() || !u.role.host) return;
    host_update(u, lr, scale, step);
    stage_up(unit);
  });
}

void ShardedOptimizer::zero_grad() {
  c10::NoGradGuard no_grad;
  grad_scale_ = 1.0;
  z_.norm.reset();
  for (auto& u : z_.units) {
    if (!u.trains()) continue;
    if (u.role.host) u.state.grad_fresh = true;  // the next step's first gradient is copied in: no pass over host memory
    else u.state.grad_shard.zero_();
  }
}

std::vector<std::string> ShardedOptimizer::save(const std::filesystem::path& dir, int64_t rank) const {
  if (steps_ == 0) return {};  // no update yet: no state
  std::vector<std::pair<std::string, at::Tensor>> state;
  for (const auto& u : z_.units)
    for (const auto& piece : u.state.pieces) {
      state.emplace_back(ckpt::moment_key(piece.name, "exp_avg", piece.begin, piece.end, false), piece.exp_avg);
      state.emplace_back(ckpt::moment_key(piece.name, "exp_avg_sq", piece.begin, piece.end, false), piece.exp_avg_sq);
    }
  const auto file = ckpt::optimizer_rank_file(rank);
  model::save_tensor_file(dir / file, state);
  return {file};
}

void ShardedOptimizer::load(const std::filesystem::path& dir, int64_t steps) {
  const ckpt::OptimizerStateReader reader(dir);
  if (reader.empty()) return;
  for (auto& u : z_.units)
    for (auto& piece : u.state.pieces) {
      reader.read(piece.name, "exp_avg", piece.begin, piece.end, piece.exp_avg);
      reader.read(piece.name, "exp_avg_sq", piece.begin, piece.end, piece.exp_avg_sq);
    }
  steps_ = steps;
}

}  // namespace lf::parallel
