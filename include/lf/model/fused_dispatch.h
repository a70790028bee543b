#pragma once
// Which implementation the layers run: the fused CUDA kernels (lf/kernels/fused_ops.h) when
// this build has them (LF_WITH_CUDA), the activations are on their device and in a dtype they
// take, and the plan's kernel paths have them on (LF_FUSED_KERNELS); else the layers' ATen code, unchanged (so CPU runs stay
// bit-identical). Threading: the table is read on every forward; replace it only between
// forwards (tests, A/B).
#include <ATen/core/Tensor.h>

#include <string>

namespace lf::kernels {
struct FusedOps;
}

namespace lf::model {

// The fused ops for activations like x, or nullptr: run the ATen code.
const kernels::FusedOps* fused_ops_for(const at::Tensor& x);

// Replaces the table (nullptr: ATen everywhere). For tests and A/B runs in one process.
void set_fused_ops(const kernels::FusedOps* ops);

// The fused ops this build has (nullptr: none): what set_kernel_paths installs when the plan's
// fused_kernels is on (lf/model/kernel_paths.h).
const kernels::FusedOps* built_fused_ops();

// One line for the worker's log: "fused CUDA kernels on", "... off (LF_FUSED_KERNELS=0)" or
// "ATen ops (this build has no fused kernels)".
std::string fused_kernels_status();

}  // namespace lf::model
