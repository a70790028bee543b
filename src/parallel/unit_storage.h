#pragma once
// How a unit's frozen parameters (a LoRA base) are stored while ZeRO-3 shards them, and what the
// unit's gather carries: a number format's storage tensors and their state. Today's format is
// dense (bf16 / fp16 / fp32: one flat tensor of the parameters' dtype); a 4-bit one (QLoRA's NF4)
// would declare its packed data and its quantization state (absmax, and what nests under it), an
// FP8 one its data and scales, each a storage tensor of its own dtype. ZeRO shards each storage
// tensor, gathers every one of them before the unit's use (in the order the format lists them,
// the same on every rank) and frees them after (zero_gather.cpp); the format decides the layout.
// A new format is a file implementing UnitStorage plus one line in unit_storage.cpp's table.
// Internal to lf_parallel. Threading: the training thread, or autograd's during backward.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lf/model/layers.h"
#include "zero_units.h"

namespace lf::parallel {

// One tensor of a format's storage, sharded: the model's tensors are views into group.flat.
struct StorageTensor {
  std::string role;  // "data"; a quantized format's "absmax", "scales", ...
  FlatGroup group;   // [padded] of the tensor's dtype; released between uses
  at::Tensor shard;  // [group.shard]: this rank's part, kept between uses (the gather's input)
};

class UnitStorage {
 public:
  virtual ~UnitStorage() = default;
  virtual std::string_view format() const = 0;
  // What a gather carries, in order.
  virtual std::vector<StorageTensor>& tensors() = 0;
  const std::vector<StorageTensor>& tensors() const { return const_cast<UnitStorage*>(this)->tensors(); }

  // Bytes held between uses (the shards) and while gathered (the full storage).
  int64_t shard_bytes() const;
  int64_t gathered_bytes() const;
  int64_t numel() const;  // the parameters' elements
};

// A format: whether it stores a parameter, and how it lays a unit's parameters out (re-pointing
// the model's tensors at views into its storage, sharded for `rank` of `world`).
struct UnitStorageFormat {
  std::string_view name;
  bool (*stores)(const at::Tensor& param);
  std::unique_ptr<UnitStorage> (*make)(std::vector<model::NamedParam> params, int64_t rank, int64_t world);
};

// The unit's frozen parameters in the first format that stores every one of them; ConfigError
// naming the parameter and its dtype when none does. The full storage is released on return
// (the shards stay).
std::unique_ptr<UnitStorage> make_unit_storage(std::vector<model::NamedParam> params, int64_t rank, int64_t world);

// The dense format (dense_storage.cpp).
bool dense_stores(const at::Tensor& param);
std::unique_ptr<UnitStorage> make_dense_storage(std::vector<model::NamedParam> params, int64_t rank, int64_t world);
// bitsandbytes' 4-bit format (bnb4_storage.cpp): packed codes, quantization state, the unit's dense rest.
bool bnb4_stores(const at::Tensor& param);
std::unique_ptr<UnitStorage> make_bnb4_storage(std::vector<model::NamedParam> params, int64_t rank, int64_t world);

}  // namespace lf::parallel
