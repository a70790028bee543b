#include "lf/model/kernel_paths.h"

#include "lf/model/fused_dispatch.h"
#include "lf/model/sdpa.h"

namespace lf::model {

namespace {
config::KernelPaths& installed() {
  static config::KernelPaths paths;
  return paths;
}
}  // namespace

const config::KernelPaths& kernel_paths() { return installed(); }

void set_kernel_paths(const config::KernelPaths& paths) {
  installed() = paths;
  set_fused_ops(paths.fused_kernels ? built_fused_ops() : nullptr);
  use_sdpa_backend(paths.sdpa_backend);
}

}  // namespace lf::model
