#pragma once
// Which implementation the layers run: the fused CUDA kernels (lf/kernels/fused_ops.h) when
// this build has them (LF_WITH_CUDA), the activations are on their device and in a dtype they
// take, and LF_FUSED_KERNELS is not 0; else the layers' ATen code, unchanged (so CPU runs stay
// bit-identical). Threading: the table is read on every forward; replace it only between
// forwards (tests, A/B).
#include <ATen/core/Tensor.h>

#include <optional>
#include <string>

namespace lf::kernels {
struct FusedOps;
}

namespace lf::model {

// The fused ops for activations like x, or nullptr: run the ATen code.
const kernels::FusedOps* fused_ops_for(const at::Tensor& x);

// Replaces the table (nullptr: ATen everywhere). For tests and A/B runs in one process.
void set_fused_ops(const kernels::FusedOps* ops);

// LF_FUSED_KERNELS: unset or "1" -> true, "0" -> false; anything else throws ConfigError.
bool fused_kernels_requested(const std::optional<std::string>& env_value);

// One line for the worker's log: "fused CUDA kernels on", "... off (LF_FUSED_KERNELS=0)" or
// "ATen ops (this build has no fused kernels)". Validates LF_FUSED_KERNELS.
std::string fused_kernels_status();

}  // namespace lf::model
