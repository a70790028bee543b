// Built without the shared PCH when LF_WITH_CUDA is on (the define is for this file only), as peak_flops.cpp.
#include "fp8_device.h"

#include <ATen/detail/CUDAHooksInterface.h>

#include <string>

#include "lf/common/error.h"
#include "lf/quant/fp8.h"

#ifdef LF_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace lf::train {

namespace {

// "sm_90 (NVIDIA H200)", or why there is none.
struct Capability {
  int major = 0, minor = 0;
  std::string name;
};

Capability capability_of(const c10::Device& device) {
  Capability c;
#ifdef LF_WITH_CUDA
  cudaDeviceProp prop{};
  if (device.is_cuda() && cudaGetDeviceProperties(&prop, device.index()) == cudaSuccess)
    return {prop.major, prop.minor, prop.name};
#endif
  c.name = device.str();
  return c;
}

}  // namespace

void check_fp8_device(const config::PrecisionSection& p, const c10::Device& device, bool emulate) {
  if (!p.fp8 || (emulate && device.is_cpu())) return;
  const std::string keys = "`fp8: true` (fp8_recipe " + p.fp8_recipe + ")";
  LF_CHECK(device.is_cuda(), ConfigError,
           "{} needs a CUDA GPU with FP8 tensor cores (compute capability 8.9+: H100 / H200, L40, RTX 40) and this "
           "worker computes on {}; lf-train does not fall back to bf16 (LLaMA-Factory #9500: a run that asked for FP8 "
           "and trained in bf16). Remove fp8 (or set it false) to train in bf16 here",
           keys, device.str());
  const auto c = capability_of(device);
  LF_CHECK(c.major * 10 + c.minor >= 89, ConfigError,
           "{} needs compute capability 8.9+ (cuBLASLt's FP8 GEMM: Ada, Hopper, Blackwell); {} is sm_{}{}. lf-train "
           "does not fall back to bf16: remove fp8 (or set it false) on this GPU",
           keys, c.name, c.major, c.minor);
}

void choose_fp8_gemm_scaling(const config::PrecisionSection& p, const std::string& knob, const c10::Device& device) {
  bool on = false;
  if (p.fp8 && quant::fp8_rowwise(quant::fp8_recipe_from_name(p.fp8_recipe)) && knob == "auto" && device.is_cuda()) {
    const auto c = capability_of(device);
    on = c.major == 9 && c.minor == 0 && at::detail::getCUDAHooks().versionCUDART() >= 12090;
  }
  quant::set_fp8_rowwise_scales_in_gemm(on);
}

}  // namespace lf::train
