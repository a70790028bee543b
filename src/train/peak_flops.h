#pragma once
// The device's dense peak FLOP/s that lf_train_mfu divides by. Internal to lf_train.
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

namespace lf::train {

// LF_PEAK_TFLOPS when set; else, for a CUDA device computing in bf16/fp16, the vendor's dense
// (no sparsity) tensor-core peak of the GPUs in the table (peak_flops.cpp); else 0: MFU is not
// reported (one info line says why and names the knob).
double peak_flops_per_s(const c10::Device& device, c10::ScalarType compute_dtype);

}  // namespace lf::train
