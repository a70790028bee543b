// The table behind fused_ops_for (lf/model/fused_dispatch.h). Built with LF_HAVE_FUSED_KERNELS
// (and no shared PCH) only where lf_kernels exists.
#include "lf/model/fused_dispatch.h"

#include <atomic>

#include "lf/common/env.h"
#include "lf/common/env_knobs.h"
#include "lf/common/error.h"
#include "lf/kernels/fused_ops.h"

namespace lf::model {
namespace {

constexpr bool kBuiltWithKernels =
#ifdef LF_HAVE_FUSED_KERNELS
    true;
#else
    false;
#endif

const kernels::FusedOps* initial_ops() {
  const bool requested = fused_kernels_requested(knob_string("LF_FUSED_KERNELS"));
#ifdef LF_HAVE_FUSED_KERNELS
  return requested ? &kernels::fused_ops() : nullptr;
#else
  (void)requested;
  return nullptr;
#endif
}

std::atomic<const kernels::FusedOps*>& table() {
  static std::atomic<const kernels::FusedOps*> ops{initial_ops()};
  return ops;
}

}  // namespace

bool fused_kernels_requested(const std::optional<std::string>& env_value) {
  const auto v = env_value.value_or("1");
  LF_CHECK(v == "0" || v == "1", ConfigError,
           "LF_FUSED_KERNELS={}: expected 1 (fused CUDA kernels where the build has them, the default) or 0 (the "
           "ATen ops, for comparison)",
           v);
  return v == "1";
}

const kernels::FusedOps* fused_ops_for(const at::Tensor& x) {
  const auto* ops = table().load(std::memory_order_acquire);
  return ops && ops->accepts(x) ? ops : nullptr;
}

void set_fused_ops(const kernels::FusedOps* ops) { table().store(ops, std::memory_order_release); }

std::string fused_kernels_status() {
  const bool requested = fused_kernels_requested(knob_string("LF_FUSED_KERNELS"));
  if (!kBuiltWithKernels) return "ATen ops (this build has no fused kernels)";
  return table().load() ? "fused CUDA kernels on (LF_FUSED_KERNELS=0 for the ATen ops)"
                        : (requested ? "fused CUDA kernels off (set_fused_ops)" : "fused CUDA kernels off (LF_FUSED_KERNELS=0)");
}

}  // namespace lf::model
