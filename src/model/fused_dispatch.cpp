// The table behind fused_ops_for (lf/model/fused_dispatch.h). Built with LF_HAVE_FUSED_KERNELS
// (and no shared PCH) only where lf_kernels exists.
#include "lf/model/fused_dispatch.h"

#include <atomic>

#include "lf/kernels/fused_ops.h"
#include "lf/model/kernel_paths.h"

namespace lf::model {
namespace {

constexpr bool kBuiltWithKernels =
#ifdef LF_HAVE_FUSED_KERNELS
    true;
#else
    false;
#endif

std::atomic<const kernels::FusedOps*>& table() {
  static std::atomic<const kernels::FusedOps*> ops{built_fused_ops()};
  return ops;
}

}  // namespace

const kernels::FusedOps* built_fused_ops() {
#ifdef LF_HAVE_FUSED_KERNELS
  return &kernels::fused_ops();
#else
  return nullptr;
#endif
}

const kernels::FusedOps* fused_ops_for(const at::Tensor& x) {
  const auto* ops = table().load(std::memory_order_acquire);
  return ops && ops->accepts(x) ? ops : nullptr;
}

void set_fused_ops(const kernels::FusedOps* ops) { table().store(ops, std::memory_order_release); }

std::string fused_kernels_status() {
  if (!kBuiltWithKernels) return "ATen ops (this build has no fused kernels)";
  return table().load() ? "fused CUDA kernels on (LF_FUSED_KERNELS=0 for the ATen ops)"
                        : (kernel_paths().fused_kernels ? "fused CUDA kernels off (set_fused_ops)"
                                                        : "fused CUDA kernels off (LF_FUSED_KERNELS=0)");
}

}  // namespace lf::model
