#pragma once
// The device's dense peak FLOP/s that lf_train_mfu divides by. Internal to lf_train.
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <optional>

namespace lf::train {

// `tflops` (the plan's logging.peak_tflops, LF_PEAK_TFLOPS) when set; else, for a CUDA device computing in bf16/fp16, the vendor's dense
// (no sparsity) tensor-core peak of the GPUs in the table (peak_flops.cpp); else 0: MFU is not
// reported (one info line says why and names the knob).
double peak_flops_per_s(const c10::Device& device, c10::ScalarType compute_dtype, std::optional<double> tflops);

}  // namespace lf::train
