#pragma once
// Host-side helpers of the launchers (no CUDA, no torch): device limits and errors.

namespace lf::kernels {

// The multiprocessors of the current device (cached per device); 1 under emulation.
int multiprocessor_count();
// Throws BackendError naming `kernel` when the last launch failed (no-op under emulation).
void check_launch(const char* kernel);
// Throws BackendError: "fused kernel <kernel>: <what>".
[[noreturn]] void fail(const char* kernel, const char* what);

}  // namespace lf::kernels
