#pragma once
// What a sharding strategy must know of an optimizer before it cuts the state (DESIGN "Optimizer
// per file"): whether the update of an element reads only that element's gradient and state, so
// that any flat element range steps on its own (AdamW: ZeRO's shards cut matrices anywhere), or
// whole matrices (Muon orthogonalises each 2-D update, GaLore projects it on a low-rank basis of
// the matrix), so that ZeRO must gather each matrix for the step or refuse the combination.
// Each optimizer file declares its spec beside its update; the strategy asks it
// (src/parallel/zero_roles.cpp). Torch-free.
#include <string_view>

namespace lf::optim {

enum class StepShape {
  kElementwise,  // any flat element range of a parameter steps on its own
  kWholeMatrix,  // the update of a parameter reads the whole tensor (a 2-D one's whole matrix)
  kReplicated,   // it changes which parameters train as it goes (BAdam): every parameter whole on one process
};

struct OptimizerSpec {
  std::string_view name;  // as the config names it ("adamw_torch")
  StepShape shape = StepShape::kElementwise;
  std::string_view why;  // kWholeMatrix: what of the matrix its update reads
};

// lf-train's AdamW (adamw.h): elementwise.
inline constexpr OptimizerSpec kAdamWSpec{"adamw_torch", StepShape::kElementwise, ""};

}  // namespace lf::optim
