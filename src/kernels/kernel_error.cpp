// The kernels' one way to fail: a BackendError naming the kernel (kept out of the .cu files so
// that nvcc never sees fmt).
#include "kernel_support.h"

#include "lf/common/error.h"

namespace lf::kernels {

[[noreturn]] void fail(const char* kernel, const char* what) {
  LF_THROW(BackendError, "fused kernel {}: {} (set LF_FUSED_KERNELS=0 to run the ATen ops instead)", kernel, what);
}

}  // namespace lf::kernels
