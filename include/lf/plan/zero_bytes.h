#pragma once
// What ZeRO holds per rank for training state (not activations), by kind, from parameter counts:
// DeepSpeed's formula (Rajbhandari et al.) with lf-train's dtypes: c bytes a compute-dtype
// parameter, fp32 gradients, fp32 master, two fp32 moments. The memory model (memory_model.h)
// counts ZeRO's state with it from config.json; ZeroStrategy::predicted_bytes() with it from the
// units it built (its log line and zero_test compare it with the tensors it holds). Torch-free.
#include <cstdint>
#include <string>
#include <vector>

namespace lf::plan {

// One ZeRO unit (zero_strategy.h: the embedding, each decoder layer, the head).
struct ZeroUnitCount {
  int64_t trainable = 0;  // elements
  int64_t frozen = 0;     // elements (stage 3 shards them; stages 1, 2 leave them replicated: any unit may hold them)
  bool host = false;      // offload: its trainable state and step on the host (offload_host_units)
};

struct ZeroLayout {
  int stage = 1;                // 1, 2, 3
  int64_t world = 1;            // ranks sharing the shards
  int64_t compute_bytes = 2;    // the compute dtype's size
  int64_t frozen_bytes = 2;     // the frozen parameters' element size (a LoRA base: the compute dtype)
  std::string offload = "none"; // none | optimizer | params
};

struct ZeroStateBytes {
  double params = 0;        // compute-dtype parameters resident between uses (stage 3: frozen shards)
  double grads = 0;         // fp32 gradients (stage 1: the full flat sums + shards; 2, 3: shards)
  double master = 0;        // fp32 master shards (on the device: the units not offloaded)
  double moments = 0;       // AdamW exp_avg + exp_avg_sq shards
  double largest_unit = 0;  // the largest unit in the compute dtype (frozen part: stage 3): stage 3's gather
  double host = 0;          // offload: of master, grads and moments, the bytes in host memory
  double total() const { return params + grads + master + moments; }
};

// grads, master and moments count every unit (as ZeroMemory does); `host` says how much of them
// is in host memory. Offload (optimizer): each host unit's compute-dtype shard stays on the
// device (stage 3's gather input, stage 2's refresh), in params.
ZeroStateBytes zero_state_bytes(const std::vector<ZeroUnitCount>& units, const ZeroLayout& layout);

// offload_ratio: which units' state goes to the host: as many whole units as fit in the ratio's
// share of the trainable parameters, taken from the head down, a unit that does not fit skipped
// (ZeRO-Offload++; zero_strategy.cpp). None taken: the caller says which share is needed.
std::vector<bool> offload_host_units(const std::vector<int64_t>& trainable_per_unit, double offload_ratio);

}  // namespace lf::plan
