#pragma once
// Whether this worker's device runs FP8 GEMMs (fp8_device.cpp). Internal to lf_train.
#include <c10/core/Device.h>

#include "lf/config/job_plan.h"

namespace lf::train {

// `fp8: true` needs a CUDA GPU of compute capability 8.9 or newer (cuBLASLt's FP8 GEMM: Ada, Hopper,
// Blackwell): ConfigError (exit 2) on the CPU or an older GPU naming the FP8 keys, never a bf16 run.
// `emulate` (LF_FP8_EMULATE=1, tests only) lets the CPU run FP8's numbers through torch's CPU _scaled_mm.
void check_fp8_device(const config::PrecisionSection& p, const c10::Device& device, bool emulate);

// The rowwise gradient GEMMs' scales inside the GEMM (quant::set_fp8_rowwise_scales_in_gemm) where ATen's rowwise
// _scaled_mm is cuBLASLt's outer-vector scaling (sm_90, CUDA 12.9+: measured bit-equal to torchao's two steps)
// and `knob` (LF_FP8_SCALES_IN_GEMM) is auto; off elsewhere (CUTLASS's kernel accumulates otherwise).
void choose_fp8_gemm_scaling(const config::PrecisionSection& p, const std::string& knob, const c10::Device& device);

}  // namespace lf::train
