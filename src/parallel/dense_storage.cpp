// The dense number format of a unit's frozen storage (unit_storage.h): the parameters as they are
// (bf16 / fp16 / fp32), one flat storage tensor per dtype, no quantization state.
#include <ATen/ATen.h>

#include <algorithm>

#include "unit_storage.h"

namespace lf::parallel {

namespace {

class DenseStorage final : public UnitStorage {
 public:
  explicit DenseStorage(std::vector<StorageTensor> tensors) : tensors_(std::move(tensors)) {}
  std::string_view format() const override { return "dense"; }
  std::vector<StorageTensor>& tensors() override { return tensors_; }

 private:
  std::vector<StorageTensor> tensors_;
};

}  // namespace

bool dense_stores(const at::Tensor& param) { return at::isFloatingType(param.scalar_type()); }

std::unique_ptr<UnitStorage> make_dense_storage(std::vector<model::NamedParam> params, int64_t rank, int64_t world) {
  // The parameters of each dtype together, dtypes in the order they first appear (one in practice).
  std::vector<at::ScalarType> dtypes;
  for (const auto& p : params)
    if (std::find(dtypes.begin(), dtypes.end(), p.tensor->scalar_type()) == dtypes.end())
      dtypes.push_back(p.tensor->scalar_type());
  std::vector<StorageTensor> tensors;
  for (const auto dtype : dtypes) {
    std::vector<model::NamedParam> these;
    for (const auto& p : params)
      if (p.tensor->scalar_type() == dtype) these.push_back(p);
    StorageTensor t{"data", make_flat_group(std::move(these), dtype, rank, world, /*trainable=*/false), {}};
    t.shard = t.group.flat.narrow(0, t.group.shard_begin(), t.group.shard).clone();
    release_storage(t.group);
    tensors.push_back(std::move(t));
  }
  return std::make_unique<DenseStorage>(std::move(tensors));
}

}  // namespace lf::parallel
