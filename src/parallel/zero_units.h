#pragma once
// ZeRO's flat groups (zero_strategy.h): some parameters of one unit laid out in one flat
// buffer of the compute dtype, padded to a multiple of the world size and cut in equal shards,
// the model's tensors re-pointed at views into it. Under stage 3 the buffer's storage is
// freed between uses and allocated again for a gather: the views (and what autograd saved of
// them) share one StorageImpl, so they see the new bytes; gathers write through an alias
// tensor of their own, so the views' version counter does not move (what FSDP2 does with
// _unsafe_preserve_version_counter) and saved tensors stay valid.
// Internal to lf_parallel. Threading: the training thread, or autograd's during backward.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "lf/comm/communicator.h"
#include "lf/model/layers.h"

namespace lf::parallel {

struct FlatParam {
  std::string name;
  at::Tensor* slot = nullptr;  // the model's tensor, a view into the group's flat buffer
  std::vector<int64_t> shape;
  int64_t offset = 0, numel = 0;  // in the flat buffer
  bool decays = true;
};

// One rank's part of a trainable parameter: flat elements [begin, end) of the parameter,
// with views into the group's shards (master, gradient, moments) at the same place.
struct ShardPiece {
  std::string name;
  int64_t begin = 0, end = 0;
  int64_t shard_offset = 0;  // where it starts in the shard
  bool decays = true;
  double lr_scale = 1.0;  // LoRA+
  at::Tensor master, grad, exp_avg, exp_avg_sq;  // [end - begin] fp32
};

struct FlatGroup {
  std::vector<FlatParam> params;
  int64_t numel = 0, padded = 0, shard = 0;  // padded = world x shard >= numel
  int64_t rank = 0;
  at::Tensor flat;  // [padded] compute dtype (fp32 for a unit holding a value head: zero_strategy.cpp)
  bool resident = true;
  comm::WorkPtr gather;  // an all-gather into flat in flight
  at::Tensor gather_input;

  bool empty() const { return params.empty(); }
  int64_t shard_begin() const { return rank * shard; }
  at::ScalarType dtype() const { return flat.defined() ? flat.scalar_type() : at::kFloat; }
  // The bytes of the gathered buffer (0 for an empty group).
  int64_t gathered_bytes() const { return flat.defined() ? padded * static_cast<int64_t>(flat.element_size()) : 0; }
  // The pieces of this rank's shard, each a view into the given [shard] buffers.
  std::vector<ShardPiece> pieces(const at::Tensor& master, const at::Tensor& grad, const at::Tensor& m,
                                 const at::Tensor& v) const;
};

// Builds the group from `params` (the model's tensors, any dtype): flat buffer in `dtype` on
// their device holding their values, slots re-pointed at views (requires_grad as `trainable`).
// The old tensors are released as each is copied.
FlatGroup make_flat_group(std::vector<model::NamedParam> params, at::ScalarType dtype, int64_t rank, int64_t world,
                          bool trainable);
// The values of the group's parameters in fp32, flat [padded] (before re-pointing: call first).
at::Tensor flat_fp32_values(const std::vector<model::NamedParam>& params, int64_t padded);

// Storage of the flat buffer: released (0 bytes) or allocated (uninitialised) in place.
void release_storage(FlatGroup& g);
void allocate_storage(FlatGroup& g);
// The flat buffer's storage through an alias with a version counter of its own (see above), [padded].
at::Tensor storage_alias(const FlatGroup& g);
// Issues the all-gather of `input` ([shard], the flat dtype) into the flat buffer (allocated
// if released); the caller waits g.gather.
void start_gather(FlatGroup& g, comm::Communicator& comm, at::Tensor input);

}  // namespace lf::parallel
