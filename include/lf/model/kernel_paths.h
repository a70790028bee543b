#pragma once
// Which implementation the layers of this process run (the plan's config::KernelPaths,
// resolved from the LF_* knobs once by the config builder): the worker installs them before
// it builds the model, so model code reads no environment. Until then, and in tests that
// install none, the defaults (every fast path on where it applies). Threading: the layers
// read them on every forward; replace them only between forwards (tests, A/B runs).
#include "lf/config/job_plan.h"

namespace lf::model {

const config::KernelPaths& kernel_paths();
// Also points the fused-op table (fused_dispatch.h) at the fused kernels or at none.
void set_kernel_paths(const config::KernelPaths& paths);

// Installs `paths` for a scope, then the previous ones again (tests).
class ScopedKernelPaths {
 public:
  explicit ScopedKernelPaths(const config::KernelPaths& paths) : saved_(kernel_paths()) { set_kernel_paths(paths); }
  ~ScopedKernelPaths() { set_kernel_paths(saved_); }
  ScopedKernelPaths(const ScopedKernelPaths&) = delete;
  ScopedKernelPaths& operator=(const ScopedKernelPaths&) = delete;

 private:
  config::KernelPaths saved_;
};

}  // namespace lf::model
