#include "zero_units.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/core/StorageImpl.h>

#include <algorithm>

#include "lf/common/error.h"

namespace lf::parallel {

std::vector<ShardPiece> FlatGroup::pieces(const at::Tensor& master, const at::Tensor& grad, const at::Tensor& m,
                                          const at::Tensor& v) const {
  std::vector<ShardPiece> out;
  const int64_t lo = shard_begin(), hi = lo + shard;
  for (const auto& p : params) {
    const int64_t b = std::max(lo, p.offset), e = std::min(hi, p.offset + p.numel);
    if (b >= e) continue;
    auto view = [&](const at::Tensor& t) { return t.narrow(0, b - lo, e - b); };
    out.push_back({p.name, b - p.offset, e - p.offset, b - lo, p.decays, 1.0, view(master), view(grad), view(m), view(v)});
  }
  return out;
}

at::Tensor flat_fp32_values(const std::vector<model::NamedParam>& params, int64_t padded) {
  c10::NoGradGuard no_grad;
  auto flat = at::zeros({padded}, params.front().tensor->options().dtype(at::kFloat));
  int64_t offset = 0;
  for (const auto& p : params) {
    const int64_t n = p.tensor->numel();
    flat.narrow(0, offset, n).copy_(p.tensor->detach().reshape({-1}));
    offset += n;
  }
  return flat;
}

FlatGroup make_flat_group(std::vector<model::NamedParam> params, at::ScalarType dtype, int64_t rank, int64_t world,
                          bool trainable) {
  FlatGroup g;
  g.rank = rank;
  for (const auto& p : params) g.numel += p.tensor->numel();
  g.shard = (g.numel + world - 1) / world;
  g.padded = g.shard * world;
  if (params.empty()) return g;
  g.flat = at::zeros({g.padded}, params.front().tensor->options().dtype(dtype));
  int64_t offset = 0;
  for (auto& p : params) {
    FlatParam fp{p.name, p.tensor, p.tensor->sizes().vec(), offset, p.tensor->numel(), true};
    auto view = g.flat.narrow(0, offset, fp.numel).view(fp.shape);
    {
      c10::NoGradGuard no_grad;
      view.copy_(p.tensor->detach());
    }
    *p.tensor = view;  // the model's slot: its old storage goes now
    if (trainable) p.tensor->requires_grad_(true);
    offset += fp.numel;
    g.params.push_back(std::move(fp));
  }
  return g;
}

void release_storage(FlatGroup& g) {
  if (!g.resident || g.empty()) return;
  auto* impl = g.flat.storage().unsafeGetStorageImpl();
  impl->set_data_ptr_noswap(at::DataPtr(nullptr, g.flat.device()));
  impl->set_nbytes(0);
  g.resident = false;
}

void allocate_storage(FlatGroup& g) {
  if (g.resident || g.empty()) return;
  auto* impl = g.flat.storage().unsafeGetStorageImpl();
  const size_t nbytes = static_cast<size_t>(g.padded) * g.flat.element_size();
  impl->set_data_ptr_noswap(impl->allocator()->allocate(nbytes));
  impl->set_nbytes(nbytes);
  g.resident = true;
}

at::Tensor storage_alias(const FlatGroup& g) {
  auto out = at::empty({0}, g.flat.options());
  out.set_(g.flat.storage(), 0, {g.padded}, {1});
  return out;
}

void start_gather(FlatGroup& g, comm::Communicator& comm, at::Tensor input) {
  LF_CHECK(input.numel() == g.shard && input.scalar_type() == g.flat.scalar_type(), BackendError,
           "ZeRO gather: input of {} elements ({}), shard {} ({})", input.numel(), c10::toString(input.scalar_type()),
           g.shard, c10::toString(g.flat.scalar_type()));
  allocate_storage(g);
  c10::NoGradGuard no_grad;
  g.gather_input = input;  // alive until the gather is waited for
  g.gather = comm.all_gather(storage_alias(g), input.contiguous());
}

}  // namespace lf::parallel
