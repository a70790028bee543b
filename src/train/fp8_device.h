#pragma once
// Whether this worker's device runs FP8 GEMMs (fp8_device.cpp). Internal to lf_train.
#include <c10/core/Device.h>

#include "lf/config/job_plan.h"

namespace lf::train {

// `fp8: true` needs a CUDA GPU of compute capability 8.9 or newer (cuBLASLt's FP8 GEMM: Ada, Hopper,
// Blackwell): ConfigError (exit 2) on the CPU or an older GPU naming the FP8 keys, never a bf16 run.
// `emulate` (LF_FP8_EMULATE=1, tests only) lets the CPU run FP8's numbers through torch's CPU _scaled_mm.
void check_fp8_device(const config::PrecisionSection& p, const c10::Device& device, bool emulate);

}  // namespace lf::train
