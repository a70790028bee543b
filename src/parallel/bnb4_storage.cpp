// The 4-bit number format of a unit's frozen storage (unit_storage.h; QLoRA under ZeRO-3: FSDP-QLoRA).
// A quantized linear layer lists its bitsandbytes storage among the unit's frozen parameters
// (model/bnb4_linear.h: <module>.weight the packed codes, .weight.absmax, and under double
// quantization .weight.nested_absmax and .weight.offset); beside them the unit's norms and biases
// stay dense. Each role is a storage tensor of its own dtype, sharded and gathered as a whole:
//   "data"         uint8: every layer's packed codes (half a byte a weight)
//   "quant_state"  the absmax values (uint8 codes nested, else fp32) and the nested absmax / offsets
//   "dense"        the norms and biases, one tensor per dtype
#include <ATen/ATen.h>

#include <algorithm>
#include <string>

#include "unit_storage.h"

namespace lf::parallel {

namespace {

class Bnb4Storage final : public UnitStorage {
 public:
  explicit Bnb4Storage(std::vector<StorageTensor> tensors) : tensors_(std::move(tensors)) {}
  std::string_view format() const override { return "bnb4"; }
  std::vector<StorageTensor>& tensors() override { return tensors_; }

 private:
  std::vector<StorageTensor> tensors_;
};

bool is_state(const std::string& name) {
  return name.ends_with(".weight.absmax") || name.ends_with(".weight.nested_absmax") || name.ends_with(".weight.offset");
}

const char* role_of(const model::NamedParam& p) {
  if (is_state(p.name)) return "quant_state";
  return p.tensor->scalar_type() == at::kByte ? "data" : "dense";
}

}  // namespace

bool bnb4_stores(const at::Tensor& param) {
  return param.scalar_type() == at::kByte || at::isFloatingType(param.scalar_type());
}

std::unique_ptr<UnitStorage> make_bnb4_storage(std::vector<model::NamedParam> params, int64_t rank, int64_t world) {
  // (role, dtype) pairs in a fixed order, the same on every rank: the gathers' order.
  std::vector<std::pair<std::string, at::ScalarType>> keys;
  for (const char* role : {"data", "quant_state", "dense"})
    for (const auto& p : params)
      if (role_of(p) == std::string(role) &&
          std::find(keys.begin(), keys.end(), std::make_pair(std::string(role), p.tensor->scalar_type())) == keys.end())
        keys.emplace_back(role, p.tensor->scalar_type());
  std::vector<StorageTensor> tensors;
  for (const auto& [role, dtype] : keys) {
    std::vector<model::NamedParam> these;
    for (const auto& p : params)
      if (role_of(p) == role && p.tensor->scalar_type() == dtype) these.push_back(p);
    StorageTensor t{role, make_flat_group(std::move(these), dtype, rank, world, /*trainable=*/false), {}};
    t.shard = t.group.flat.narrow(0, t.group.shard_begin(), t.group.shard).clone();
    release_storage(t.group);
    tensors.push_back(std::move(t));
  }
  return std::make_unique<Bnb4Storage>(std::move(tensors));
}

}  // namespace lf::parallel
